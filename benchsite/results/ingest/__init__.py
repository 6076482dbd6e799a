"""Ingestion: v3 records in, runs, series, results and run summaries stored.

- `parse`: splitting a body into its records; the general path: every body shape and
  writer's quirk, every problem listed.
- `fast`: the msgspec fast path for canonical records (most records).
- `mixed`: each record by the fast path, else the general path; problems capped.
- `normalize`: what both produce: a `Batch`, built by a `Normalizer` from `RecordFields`.
- `checks`: the value checks and the `Problems` collector.
- `store`: writing a batch: COPY on PostgreSQL, the ORM elsewhere, behind `Store`.
- `summaries`: the run summaries maintained as results arrive.
- `upload`: `store_upload` and `rederive`, the entry points (exported here).
- `ownership`: `delete_uploads`, which deletes uploads with exactly their own results.
"""

from benchsite.results.ingest.ownership import delete_uploads
from benchsite.results.ingest.upload import (
    KeyReused,
    RepoForbidden,
    Stored,
    UploadRefused,
    rederive,
    store_upload,
)

__all__ = ["KeyReused", "RepoForbidden", "Stored", "UploadRefused", "delete_uploads", "rederive",
           "store_upload"]
