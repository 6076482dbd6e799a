"""Storing uploads: the one path by which results enter the database.

The upload API, the demo loader and the benchmark workers all call `store_upload`. It is
idempotent (a repeat returns the first upload), all-or-nothing (one transaction), and keeps
the raw payload, from which `rederive` can store the results again.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, Q
from django.utils import timezone
from isal import igzip

from benchsite.gc_pause import gc_paused
from benchsite.results.ingest import mixed, parse
from benchsite.results.ingest.store import store_for
from benchsite.results.ingest.summaries import refresh_slices, resummarize_runs
from benchsite.results.models import Run, Upload, UploadToken
from benchsite.results.partitions import ensure_months
from benchsite.results.signals import upload_stored


class UploadRefused(Exception):
    """An upload that is not stored; `status` is the HTTP status the API answers with."""

    status = 400

    def __init__(self, errors: list[str], count: int | None = None):
        super().__init__("; ".join(errors[:5]))
        self.errors = errors
        self.count = len(errors) if count is None else count  # `errors` may list fewer


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


# Parsing and storing allocate hundreds of thousands of small acyclic objects: with the
# collector on, its collections walked them again and again (a fifth of an upload's time).
# Paused until the call returns, when the batch is freed by reference counting.
@gc_paused()
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
    Raises UploadRefused (or a subclass) with every problem; then nothing is stored.
    """
    metadata = {key: value for key, value in (metadata or {}).items() if value not in (None, "")}
    received = timezone.now()
    # The content hash (and the kept payload's gzip, where the client sent none) on another
    # thread while the body is split and its first part read here: hashlib and ISA-L let go of
    # the GIL (2.5 MB: 1.2 ms of hashing, 0.5 of gzip). A body that cannot be read is refused
    # after the repeat check, as when it came first; a repeat (a client's retry, rare) pays
    # for the first part's reading it does not need.
    with ThreadPoolExecutor(1, thread_name_prefix="upload-hash") as beside:
        digest_of = beside.submit(content_hash, body, metadata)
        gzip_of = beside.submit(igzip.compress, body, 1) if payload_gzip is None else None
        try:
            reading: _Reading | UploadRefused = _Reading(body, metadata, received=received,
                                                         token=token)
        except UploadRefused as refused:
            reading = refused
        digest = digest_of.result()
    repeat = _find_repeat(digest, idempotency_key, token, source)
    if repeat is not None:
        _check_repos(token, repeat.repos)  # a replay tells nothing to a token of other repos
        return Stored(repeat, created=False)
    if isinstance(reading, UploadRefused):
        raise reading

    upload = Upload(
        created_at=received,
        source=source,
        token=token,
        idempotency_key=idempotency_key,
        content_hash=digest,
        payload_gzip=payload_gzip if gzip_of is None else gzip_of.result(),
        request_metadata=metadata,
        # Recorded in the upload's transaction: a detection task lost after the commit
        # (broker down, worker killed) is queued again by the sweeper.
        detection_owed_at=received if announce and settings.BENCH_DETECT_ON_UPLOAD else None,
    )
    try:
        with transaction.atomic():
            reading.store(upload)
            if announce:
                transaction.on_commit(
                    lambda: upload_stored.send(sender=Upload, upload_id=upload.pk))
    except IntegrityError:
        # A concurrent request stored the same upload first.
        repeat = _find_repeat(digest, idempotency_key, token, source)
        if repeat is None:
            raise
        return Stored(repeat, created=False)
    return Stored(upload, created=True)


@gc_paused()  # as store_upload (above)
def rederive(upload: Upload) -> int:
    """Store an upload's results again from its raw payload (after a normalisation change);
    returns the number of results. Missing timestamps again mean the upload's time."""
    reading = _Reading(upload.payload(), upload.request_metadata, received=upload.created_at)
    with transaction.atomic():
        stale = list(upload.results.values_list("run_id").annotate(n=Count("id")))
        for run_id, count in stale:
            Run.objects.filter(pk=run_id).update(result_count=F("result_count") - count)
        upload.results.all().delete()
        reading.store(upload)
        affected = {run_id for run_id, _ in stale}
        affected.update(upload.results.values_list("run_id", flat=True).distinct())
        resummarize_runs(sorted(affected))
        refresh_slices(set(Run.objects.filter(pk__in=affected)
                           .values_list("repo", "head_branch")))
    return upload.record_count


class _Reading:
    """An upload's body read and stored chunk by chunk (`ingest.mixed`, `Store.save`).

    The first chunk is read when this is made, before the upload's transaction, and the
    partitions of its months made (those of most uploads' results): making one inside the
    transaction would hold its locks until the commit. A month the later chunks bring is
    made after the commit; its rows wait in the DEFAULT partition till then. Missing
    timestamps mean `received`."""

    def __init__(self, body: bytes, metadata: dict[str, Any], received: datetime,
                 token: UploadToken | None = None):
        self.token = token
        defaults = {"timestamp": int(received.timestamp()), **metadata}
        with _body_errors():
            records, envelope = parse.split_body(body)
            # a backslash is found by memchr (0.03 ms for 2.5 MB); the escape by a substring
            # search, which took 1.3-3 ms an upload, only in a body that has one
            escaped_nul = b"\\" in body and b"\\u0000" in body
            self.normalization = mixed.Normalization(
                records, {**defaults, **envelope}, escaped_nul=escaped_nul)
            # A forbidden repo's runs and series are not even written before the refusal.
            chunks = self.normalization.chunks(
                admit=lambda batch: not _forbidden(token, batch.repos))
            first = next(chunks, None)
        self.chunks = chunks if first is None else itertools.chain([first], chunks)
        if first is not None:
            ensure_months(connection, {result.timestamp for result in first})

    def store(self, upload: Upload) -> None:
        """Store the results as `upload`'s (inserting `upload` if it is new), inside the
        caller's transaction; UploadRefused (or a subclass) lists every problem, and the
        caller's transaction then undoes what was written."""
        normalization = self.normalization
        with _body_errors():
            written = store_for(connection).save(upload, normalization.batch, self.chunks,
                                                 complete=lambda: normalization.complete)
        if normalization.errors:
            raise UploadRefused(normalization.errors, normalization.count)
        batch = normalization.batch
        _check_repos(self.token, batch.repos)
        upload.record_count = written.count
        upload.repos = sorted(batch.repos)
        upload.save(update_fields=["record_count", "repos"])
        transaction.on_commit(lambda: ensure_months(connection, written.timestamps),
                              robust=True)


@contextmanager
def _body_errors() -> Iterator[None]:
    """A body that is not JSON (found as it is read) refused as UploadRefused."""
    try:
        yield
    except parse.BodyError as error:
        raise UploadRefused([str(error)]) from None


def _forbidden(token: UploadToken | None, repos: Iterable[str]) -> list[str]:
    """The repos the token may not upload for, sorted."""
    return [] if token is None else sorted(repo for repo in repos if not token.allows(repo))


def _check_repos(token: UploadToken | None, repos: Iterable[str]) -> None:
    if forbidden := _forbidden(token, repos):
        raise RepoForbidden(
            [f"repo {repo!r}: token {token.name!r} may upload only for {token.repos}"
             for repo in forbidden]
        )


def _find_repeat(digest: str, key: str | None, token: UploadToken | None,
                 source: str) -> Upload | None:
    """The earlier upload of the same content, or of the same key from the same token (or,
    without a token, from the same source)."""
    match = Q(content_hash=digest)
    if key:
        sender = Q(token=token) if token else Q(token__isnull=True, source=source)
        match |= Q(idempotency_key=key) & sender
    earlier = list(Upload.objects.filter(match).only(
        "id", "content_hash", "idempotency_key", "record_count", "repos", "token_id", "source"))

    def same_sender(upload: Upload) -> bool:
        if token is not None:
            return upload.token_id == token.pk
        return upload.token_id is None and upload.source == source

    by_key = next((upload for upload in earlier
                   if key and upload.idempotency_key == key and same_sender(upload)), None)
    if by_key is not None and by_key.content_hash != digest:
        raise KeyReused(
            [f"Idempotency-Key {key!r} was used by upload {by_key.pk} with different "
             "content; use a new key for new content"]
        )
    return by_key or (earlier[0] if earlier else None)
