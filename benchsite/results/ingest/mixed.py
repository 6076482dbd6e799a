"""Normalising an upload record by record: each record by the fast path when it takes it, by
the general path only when the fast path refuses it. The body is never held decoded as a
whole (each record stays JSON text, a view of the body, until it is read), and a large
upload with one bad record costs about what a good one does. Imports no Django.

Problems are listed up to MAX_LISTED (then counted), so that neither the error list nor the
response grows with the body.
"""

from __future__ import annotations

import itertools
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
    normalization = Normalization(records, metadata, escaped_nul)
    normalization.read()
    return normalization.outcome()


class Normalization:
    """The records of one upload normalised a part at a time (`read`), so that a caller can
    store a part while it reads the next; `outcome` is what `normalize` returns."""

    def __init__(self, records: Iterable[parse.Text | Any], metadata: dict[str, Any],
                 escaped_nul: bool = True):
        self.normalizer = Normalizer(metadata)
        self.batch = self.normalizer.batch
        self.fast = FastPath(self.normalizer)
        self.records = enumerate(records, start=1)
        self.escaped_nul = escaped_nul
        self.errors: list[str] = []
        self.count = 0  # problems, listed or not
        self.seen = 0  # records

    def read(self, size: int | None = None) -> int:
        """Normalise up to `size` more records (all by default) into `batch`; returns how many
        it read (0 at the end). Raises parse.BodyError for a record that is not JSON."""
        results, fast, errors = self.batch.results, self.fast, self.errors
        read = 0
        for index, record in itertools.islice(self.records, size):
            read += 1
            result = None
            if isinstance(record, parse.Text) and not (self.escaped_nul and _has_nul(record)):
                result = fast.decode(record)
            if result is None:
                problems = Problems(f"records[{index - 1}]")
                result = parse.record_result(parse.decode_record(record), self.normalizer,
                                             problems)
                if problems.items:
                    self.count += len(problems.items)
                    errors.extend(problems.items[:MAX_LISTED - len(errors)])
            if result is not None:
                results.append(result)
        self.seen += read
        return read

    def outcome(self) -> tuple[Batch, list[str], int]:
        """The batch, the problems listed (with the count of those not listed) and the number
        of all, once every record is read."""
        errors, count = list(self.errors), self.count
        if not self.seen:
            count += 1
            errors.append("records: no records in the upload")
        if count > len(errors):
            errors.append(f"... and {count - len(errors)} more problems ({count} in all)")
        return self.batch, errors, count


def _has_nul(record: bytes | msgspec.Raw) -> bool:
    return b"\\u0000" in (record if isinstance(record, bytes) else bytes(record))
