"""Storing uploads: the one path by which results enter the database.

The upload API, the demo loader and the benchmark workers all call `store_upload`. It is
idempotent (a repeat returns the first upload), all-or-nothing (one transaction), and keeps
the raw payload. Results go in with PostgreSQL's COPY; runs and series are upserted in bulk,
so the number of queries does not grow with the number of records.
"""

from __future__ import annotations

import gc
import gzip
import hashlib
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, Q

from benchsite.results import v3, v3_fast
from benchsite.results.models import Result, Run, Series, Upload, UploadToken
from benchsite.results.signals import upload_stored
from benchsite.results.summaries import resummarize_runs, summarize_batch

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
    announce: bool = True,
) -> Stored:
    """Validate and store one upload of v3 records.

    `metadata` holds run fields the records may lack (query parameters of the API);
    `payload_gzip` is the body as the client compressed it, kept instead of recompressing.
    `announce=False` skips the `upload_stored` signal (bulk loaders run detection once after).
    Raises UploadRefused (or a subclass) with every problem; then nothing is written.
    """
    metadata = {key: value for key, value in (metadata or {}).items() if value not in (None, "")}
    digest = content_hash(body, metadata)
    repeat = _find_repeat(digest, idempotency_key)
    if repeat is not None:
        return Stored(repeat, created=False)

    batch = _normalize(body, metadata, received=datetime.now(UTC))
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
            if announce:
                transaction.on_commit(
                    lambda: upload_stored.send(sender=Upload, upload_id=upload.pk))
    except IntegrityError:
        # A concurrent request stored the same upload first.
        repeat = _find_repeat(digest, idempotency_key)
        if repeat is None:
            raise
        return Stored(repeat, created=False)
    return Stored(upload, created=True)


def rederive(upload: Upload) -> int:
    """Store an upload's results again from its raw payload (after a normalisation change);
    returns the number of results. Missing timestamps again mean the upload's time."""
    batch = _normalize(upload.payload(), upload.request_metadata, received=upload.created_at)
    with transaction.atomic():
        stale = list(upload.results.values_list("run_id").annotate(n=Count("id")))
        for run_id, count in stale:
            Run.objects.filter(pk=run_id).update(result_count=F("result_count") - count)
        upload.results.all().delete()
        _store_batch(upload, batch)
        affected = {run_id for run_id, _ in stale}
        affected.update(upload.results.values_list("run_id", flat=True).distinct())
        resummarize_runs(sorted(affected))
        upload.record_count = len(batch.results)
        upload.repos = sorted(batch.repos)
        upload.save(update_fields=["record_count", "repos"])
    return upload.record_count


def _normalize(body: bytes, metadata: dict[str, Any], received: datetime) -> v3.Batch:
    with _cyclic_gc_paused():
        batch = v3_fast.normalize(body, {"timestamp": int(received.timestamp()), **metadata})
        if batch is not None:
            return batch
        try:
            records, envelope = v3.parse_body(body)
        except v3.BodyError as error:
            raise UploadRefused([str(error)]) from None
        defaults = {"timestamp": int(received.timestamp()), **metadata, **envelope}
        batch, errors = v3.normalize(records, defaults)
        del records
    if errors:
        raise UploadRefused(errors)
    return batch


@contextmanager
def _cyclic_gc_paused():
    """Parsing allocates millions of small acyclic objects, which would trigger the cyclic
    collector again and again for nothing (half the parse time); reference counting frees
    them anyway."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _find_repeat(digest: str, key: str | None) -> Upload | None:
    match = Q(content_hash=digest) | Q(idempotency_key=key) if key else Q(content_hash=digest)
    earlier = list(Upload.objects.filter(match).only("id", "content_hash", "idempotency_key",
                                                     "record_count"))
    by_key = next((upload for upload in earlier if key and upload.idempotency_key == key), None)
    if by_key is not None and by_key.content_hash != digest:
        raise KeyReused(
            [f"Idempotency-Key {key!r} was used by upload {by_key.pk} with different "
             "content; use a new key for new content"]
        )
    return by_key or (earlier[0] if earlier else None)


def _store_batch(upload: Upload, batch: v3.Batch) -> None:
    run_ids = _ids_by_identity(Run, list(batch.runs))
    new_runs = [run for identity, run in batch.runs.items() if identity not in run_ids]
    if new_runs:
        Run.objects.bulk_create(
            [Run(identity=run.identity, repo=run.repo, head_branch=run.head_branch,
                 head_sha=run.head_sha, workflow_id=run.workflow_id,
                 run_attempt=run.run_attempt, job_id=run.job_id, name=run.name,
                 timestamp=_datetime(run.timestamp), device=run.device, arch=run.arch,
                 runners=run.runners, dependencies=run.dependencies, extra=run.extra,
                 upload=upload) for run in new_runs],
            ignore_conflicts=True,
        )
        run_ids.update(_ids_by_identity(Run, [run.identity for run in new_runs]))
    series_ids = _series_ids(batch.series)
    _insert_results(upload.pk, batch.results, run_ids, series_ids)
    summarize_batch(batch, run_ids)

    counts: dict[int, int] = {}
    for result in batch.results:
        counts[run_ids[result.run]] = counts.get(run_ids[result.run], 0) + 1
    for run_id, count in counts.items():
        Run.objects.filter(pk=run_id).update(result_count=F("result_count") + count)
    for run in batch.runs.values():  # a run continued by a later upload may start earlier
        Run.objects.filter(pk=run_ids[run.identity], timestamp__gt=_datetime(run.timestamp)
                           ).update(timestamp=_datetime(run.timestamp))


class _SeriesIdCache:
    """Series ids by identity, kept across uploads by this process.

    Looking ids up by id is several times cheaper than by identity, so a cached id is only
    checked to still exist (a flushed or restored database invalidates the whole cache).
    Ids are remembered when the transaction that saw them commits: a rolled-back upload
    adds nothing.
    """

    def __init__(self, limit: int = 200_000):
        self.limit = limit
        self.ids: dict[str, dict[str, int]] = {}  # by database alias

    def get(self, identities) -> tuple[dict[str, int], list[str]]:
        known = self.ids.get(connection.alias, {})
        found, missing = {}, []
        for identity in identities:
            series_id = known.get(identity)
            if series_id is None:
                missing.append(identity)
            else:
                found[identity] = series_id
        if found and _count_existing(found.values()) != len(found):
            known.clear()
            return {}, list(identities)
        return found, missing

    def remember_on_commit(self, ids: dict[str, int]) -> None:
        alias = connection.alias

        def remember():
            known = self.ids.setdefault(alias, {})
            if len(known) + len(ids) > self.limit:
                known.clear()
            known.update(ids)

        transaction.on_commit(remember)


def _count_existing(series_ids) -> int:
    if connection.vendor != "postgresql":
        return Series.objects.filter(pk__in=list(series_ids)).count()
    with connection.cursor() as cursor:
        # A join with the unnested array probes the primary key once per id; `id = ANY(%s)`
        # with thousands of ids is planned as a scan comparing every row with every id.
        cursor.execute(f"SELECT count(*) FROM unnest(%s::bigint[]) AS given(id) "
                       f"JOIN {Series._meta.db_table} USING (id)", [list(series_ids)])
        return cursor.fetchone()[0]


SERIES_ID_CACHE = _SeriesIdCache()


def _series_ids(series: dict[str, v3.SeriesInfo]) -> dict[str, int]:
    found, missing = SERIES_ID_CACHE.get(series)
    if missing:
        looked_up = _ids_by_identity(Series, missing)
        new = {identity: series[identity] for identity in missing if identity not in looked_up}
        if new:
            _insert_series(new)
            looked_up.update(_ids_by_identity(Series, list(new)))
        SERIES_ID_CACHE.remember_on_commit(looked_up)
        found.update(looked_up)
    return found


SERIES_COLUMNS = ("identity", "suite", *v3.SeriesInfo._fields)
JSON_SERIES_COLUMNS = ("origins", "extra_info")


def _insert_series(items: dict[str, v3.SeriesInfo]) -> None:
    """Create series, skipping any that a concurrent upload created meanwhile."""
    if connection.vendor != "postgresql":
        Series.objects.bulk_create(
            [Series(identity=identity, suite=item.suite, **item._asdict())
             for identity, item in items.items()],
            batch_size=2000, ignore_conflicts=True,
        )
        return
    table = Series._meta.db_table
    columns = ", ".join(SERIES_COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMP TABLE new_series ON COMMIT DROP AS "
                       f"SELECT {columns} FROM {table} WITH NO DATA")
        _copy(cursor, "new_series", SERIES_COLUMNS, (
            "\t".join((identity, _copy_text(item.suite), *(
                _copy_json(value) if name in JSON_SERIES_COLUMNS else _copy_text(value)
                for name, value in zip(item._fields, item, strict=True)
            )))
            for identity, item in items.items()
        ))
        cursor.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM new_series "
                       "ON CONFLICT (identity) DO NOTHING")
        cursor.execute("DROP TABLE new_series")


def _ids_by_identity(model, identities: list[str]) -> dict[str, int]:
    if connection.vendor == "postgresql":
        # One array parameter (an IN list of thousands of parameters is slow to build),
        # joined as a table: see _count_existing.
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT identity, id FROM unnest(%s::text[]) AS given(identity) "
                f"JOIN {model._meta.db_table} USING (identity)",
                [identities],
            )
            return dict(cursor.fetchall())
    found: dict[str, int] = {}
    for start in range(0, len(identities), LOOKUP_CHUNK):
        chunk = identities[start : start + LOOKUP_CHUNK]
        found.update(model.objects.filter(identity__in=chunk).values_list("identity", "id"))
    return found


RESULT_COLUMNS = ("series_id", "run_id", "upload_id", "timestamp", "value", "values", "target",
                  "string_values", "extra_info", "unknown")
COPY_CHUNK = 500


def _insert_results(upload_id: int, results: list[v3.ResultInfo], run_ids: dict[str, int],
                    series_ids: dict[str, int]) -> None:
    if connection.vendor != "postgresql":
        Result.objects.bulk_create(
            (Result(series_id=series_ids[r.series], run_id=run_ids[r.run], upload_id=upload_id,
                    timestamp=_datetime(r.timestamp), value=r.value, values=r.values,
                    target=r.target, string_values=r.string_values, extra_info=r.extra_info,
                    unknown=r.unknown) for r in results),
            batch_size=2000,
        )
        return

    def lines():
        upload = str(upload_id)
        times: dict[int, str] = {}
        for r in results:
            when = times.get(r.timestamp)
            if when is None:
                when = times[r.timestamp] = _datetime(r.timestamp).isoformat()
            yield "\t".join((
                str(series_ids[r.series]), str(run_ids[r.run]), upload, when,
                _copy_float(r.value), "{" + ",".join(map(repr, r.values)) + "}",
                _copy_float(r.target), _copy_json(r.string_values), _copy_json(r.extra_info),
                _copy_json(r.unknown),
            ))

    with connection.cursor() as cursor:
        _copy(cursor, Result._meta.db_table, RESULT_COLUMNS, lines())


def _copy(cursor, table: str, columns: tuple[str, ...], lines: Iterable[str]) -> None:
    """COPY rows given as lines in PostgreSQL's text format, built by the caller: several
    times faster than adapting values row by row. Sent in chunks so that the server works
    on one chunk while the next is built."""
    quoted = ", ".join(f'"{column}"' for column in columns)
    with cursor.cursor.copy(f"COPY {table} ({quoted}) FROM STDIN") as copy:
        chunk = []
        for line in lines:
            chunk.append(line)
            if len(chunk) == COPY_CHUNK:
                chunk.append("")
                copy.write("\n".join(chunk))
                chunk = []
        if chunk:
            chunk.append("")
            copy.write("\n".join(chunk))


def _copy_text(value: str) -> str:
    return (value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
            .replace("\r", "\\r"))


def _copy_float(value: float | None) -> str:
    return "\\N" if value is None else repr(value)


def _copy_json(value: Any) -> str:
    if value is None:
        return "\\N"
    # JSON text never holds a raw tab or newline; only backslashes need COPY's escaping.
    return orjson.dumps(value).decode().replace("\\", "\\\\")


def _datetime(timestamp: int) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)
