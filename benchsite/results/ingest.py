"""Storing uploads: the one path by which results enter the database.

The upload API, the demo loader and the benchmark workers all call `store_upload`. It is
idempotent (a repeat returns the first upload), all-or-nothing (one transaction), and keeps
the raw payload. Results go in with PostgreSQL's COPY; runs and series are upserted in bulk,
so the number of queries does not grow with the number of records.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from django.db import IntegrityError, connection, transaction
from django.db.models import F

from benchsite.results import v3
from benchsite.results.models import Result, Run, Series, Upload, UploadToken

LOOKUP_CHUNK = 5000


class UploadRefused(Exception):
    """An upload that is not stored; `status` is the HTTP status the API answers with."""

    status = 400

    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors[:5]))
        self.errors = errors


class KeyReused(UploadRefused):
    status = 409


class RepoForbidden(UploadRefused):
    status = 403


@dataclass(frozen=True)
class Stored:
    upload: Upload
    created: bool  # False: a repeat of `upload`


def content_hash(body: bytes, metadata: dict[str, Any]) -> str:
    digest = hashlib.sha256(orjson.dumps(metadata, option=orjson.OPT_SORT_KEYS))
    digest.update(b"\n")
    digest.update(body)
    return digest.hexdigest()


def store_upload(
    body: bytes,
    *,
    metadata: dict[str, Any] | None = None,
    token: UploadToken | None = None,
    idempotency_key: str | None = None,
    source: str = Upload.Source.API,
    payload_gzip: bytes | None = None,
) -> Stored:
    """Validate and store one upload of v3 records.

    `metadata` holds run fields the records may lack (query parameters of the API);
    `payload_gzip` is the body as the client compressed it, kept instead of recompressing.
    Raises UploadRefused (or a subclass) with every problem; then nothing is written.
    """
    metadata = {key: value for key, value in (metadata or {}).items() if value not in (None, "")}
    digest = content_hash(body, metadata)
    repeat = _find_repeat(digest, idempotency_key)
    if repeat is not None:
        return Stored(repeat, created=False)

    try:
        records, envelope = v3.parse_body(body)
    except v3.BodyError as error:
        raise UploadRefused([str(error)]) from None
    batch, errors = v3.normalize(records, {**metadata, **envelope})
    if errors:
        raise UploadRefused(errors)
    if token is not None:
        forbidden = sorted(repo for repo in batch.repos if not token.allows(repo))
        if forbidden:
            raise RepoForbidden(
                [f"repo {repo!r}: token {token.name!r} may upload only for {token.repos}"
                 for repo in forbidden]
            )

    upload = Upload(
        source=source,
        token=token,
        idempotency_key=idempotency_key,
        content_hash=digest,
        payload_gzip=payload_gzip or gzip.compress(body, compresslevel=1),
        request_metadata=metadata,
        record_count=len(batch.results),
        repos=sorted(batch.repos),
    )
    try:
        with transaction.atomic():
            upload.save()
            _store_batch(upload, batch)
    except IntegrityError:
        # A concurrent request stored the same upload first.
        repeat = _find_repeat(digest, idempotency_key)
        if repeat is None:
            raise
        return Stored(repeat, created=False)
    return Stored(upload, created=True)


def _find_repeat(digest: str, key: str | None) -> Upload | None:
    if key:
        earlier = Upload.objects.filter(idempotency_key=key).only("id", "content_hash",
                                                                   "record_count").first()
        if earlier is not None:
            if earlier.content_hash != digest:
                raise KeyReused(
                    [f"Idempotency-Key {key!r} was used by upload {earlier.pk} with different "
                     "content; use a new key for new content"]
                )
            return earlier
    return Upload.objects.filter(content_hash=digest).only("id", "record_count").first()


def _store_batch(upload: Upload, batch: v3.Batch) -> None:
    run_ids = _upsert(Run, batch.runs.values(), lambda run: Run(
        identity=run.identity, repo=run.repo, head_branch=run.head_branch,
        head_sha=run.head_sha, workflow_id=run.workflow_id, run_attempt=run.run_attempt,
        job_id=run.job_id, name=run.name, timestamp=_datetime(run.timestamp),
        device=run.device, arch=run.arch, runners=run.runners,
        dependencies=run.dependencies, extra=run.extra, upload=upload,
    ))
    series_ids = _upsert(Series, batch.series.values(), lambda series: Series(
        identity=series.identity, repo=series.repo, benchmark=series.benchmark,
        mode=series.mode, dtype=series.dtype, model=series.model,
        model_type=series.model_type, backend=series.backend, suite=series.suite,
        origins=series.origins, device=series.device, arch=series.arch,
        metric=series.metric, extra_info=series.extra_info,
    ))
    rows = (
        (series_ids[result.series], run_ids[result.run], upload.pk, _datetime(result.timestamp),
         result.value, result.values, result.target, result.string_values, result.extra_info,
         result.unknown)
        for result in batch.results
    )
    _insert_results(rows)
    counts: dict[int, int] = {}
    for result in batch.results:
        counts[run_ids[result.run]] = counts.get(run_ids[result.run], 0) + 1
    for run_id, count in counts.items():
        Run.objects.filter(pk=run_id).update(result_count=F("result_count") + count)
    for run in batch.runs.values():  # a run continued by a later upload may start earlier
        Run.objects.filter(pk=run_ids[run.identity], timestamp__gt=_datetime(run.timestamp)
                           ).update(timestamp=_datetime(run.timestamp))


def _upsert(model, items: Iterable[Any], build) -> dict[str, int]:
    """Ids by identity for every item, creating the rows that do not exist yet."""
    items = list(items)
    ids = _ids_by_identity(model, [item.identity for item in items])
    missing = [build(item) for item in items if item.identity not in ids]
    if missing:
        model.objects.bulk_create(missing, batch_size=2000, ignore_conflicts=True)
        ids.update(_ids_by_identity(model, [row.identity for row in missing]))
    return ids


def _ids_by_identity(model, identities: list[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for start in range(0, len(identities), LOOKUP_CHUNK):
        chunk = identities[start : start + LOOKUP_CHUNK]
        found.update(model.objects.filter(identity__in=chunk).values_list("identity", "id"))
    return found


RESULT_COLUMNS = ("series_id", "run_id", "upload_id", "timestamp", "value", "values", "target",
                  "string_values", "extra_info", "unknown")


def _insert_results(rows: Iterator[tuple]) -> None:
    if connection.vendor == "postgresql":
        from psycopg.types.json import Jsonb

        columns = ", ".join(f'"{column}"' for column in RESULT_COLUMNS)
        sql = f"COPY {Result._meta.db_table} ({columns}) FROM STDIN"
        with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
            for row in rows:
                copy.write_row(
                    (*row[:7], *(None if item is None else Jsonb(item) for item in row[7:]))
                )
        return
    Result.objects.bulk_create(
        (Result(**dict(zip(RESULT_COLUMNS, row, strict=True))) for row in rows), batch_size=2000
    )


def _datetime(timestamp: int) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)
