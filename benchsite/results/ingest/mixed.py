"""Normalising an upload record by record: each record by the fast path when it takes it, by
the general path only when the fast path refuses it. The body is never held decoded as a
whole (each record stays JSON text, a view of the body, until it is read), and a large
upload with one bad record costs about what a good one does. Imports no Django.

Problems are listed up to MAX_LISTED (then counted), so that neither the error list nor the
response grows with the body.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from benchsite.results.ingest import parse
from benchsite.results.ingest.checks import Problems
from benchsite.results.ingest.fast import FastPath
from benchsite.results.ingest.normalize import Batch, Normalizer

MAX_LISTED = 100  # problems listed by name; the others are counted


def normalize(records: Iterable[parse.Text | Any], metadata: dict[str, Any],
              escaped_nul: bool = True) -> tuple[Batch, list[str], int]:
    """The batch of `parse.split_body`'s records, the first MAX_LISTED problems (by record
    index and field) and the number of all. `escaped_nul`: whether the body holds an escaped
    NUL character (`\\u0000`), which only the general path refuses."""
    normalizer = Normalizer(metadata)
    fast = FastPath(normalizer)
    results = normalizer.batch.results
    errors: list[str] = []
    count = index = 0
    for index, record in enumerate(records, start=1):
        result = None
        if isinstance(record, parse.Text) and not (escaped_nul and _has_nul(record)):
            result = fast.decode(record)
        if result is None:
            problems = Problems(f"records[{index - 1}]")
            result = parse.record_result(parse.decode_record(record), normalizer, problems)
            if problems.items:
                count += len(problems.items)
                errors.extend(problems.items[:MAX_LISTED - len(errors)])
        if result is not None:
            results.append(result)
    if not index:
        count += 1
        errors.append("records: no records in the upload")
    if count > len(errors):
        errors.append(f"... and {count - len(errors)} more problems ({count} in all)")
    return normalizer.batch, errors, count


def _has_nul(record: bytes | msgspec.Raw) -> bool:
    return b"\\u0000" in (record if isinstance(record, bytes) else bytes(record))
