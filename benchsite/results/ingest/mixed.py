"""Normalising an upload record by record: each record by the fast path when it takes it, by
the general path only when the fast path refuses it. The body is never held decoded as a
whole (each record stays JSON text, a view of the body, until it is read), and a large
upload with one bad record costs about what a good one does. Imports no Django.

The results come in chunks as the records are read (`Normalization.chunks`), so that the
database stores one chunk while the next is read. Problems are listed up to MAX_LISTED
(then counted), so that neither the error list nor the response grows with the body.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

from benchsite.results.ingest import parse
from benchsite.results.ingest.checks import Problems
from benchsite.results.ingest.fast import FastPath
from benchsite.results.ingest.normalize import Batch, Normalizer, ResultInfo

MAX_LISTED = 100  # problems listed by name; the others are counted
CHUNK = 500  # results a chunk: small enough to overlap, large enough to cost nothing a record
FIRST_CHUNK = 100  # the first is smaller: the database starts writing sooner


class Normalization:
    """The records of `parse.split_body`, normalised into `batch` as `chunks()` reads them.

    `errors` (the first MAX_LISTED problems, by record index and field), `count` (of all
    problems) and `complete` (whether every result was yielded: no problem, admitted) are
    final once `chunks()` is exhausted. `escaped_nul`: whether the body holds
    an escaped NUL character (`\\u0000`), which only the general path refuses."""

    def __init__(self, records: Iterable[parse.Text | Any], metadata: dict[str, Any],
                 escaped_nul: bool = True):
        self.records = records
        self.escaped_nul = escaped_nul
        normalizer = Normalizer(metadata)
        self.normalizer = normalizer
        self.batch = normalizer.batch
        self.errors: list[str] = []
        self.count = 0
        self.complete = False

    def chunks(self, admit: Callable[[Batch], bool] = lambda batch: True,
               ) -> Iterator[list[ResultInfo]]:
        """The results, CHUNK at a time (the first FIRST_CHUNK), as the records are read.
        Once a problem is found or `admit` refuses the batch (checked before each chunk),
        the rest of the records are still read, for their problems, but no chunk is yielded
        any more: nothing of an upload that will be refused reaches the database after that
        point."""
        fast = FastPath(self.normalizer)
        results = self.batch.results
        errors = self.errors
        escaped_nul = self.escaped_nul
        size = min(FIRST_CHUNK, CHUNK)
        open_chunk = 0  # where the results not yet yielded start
        yielding = True
        index = 0
        for index, record in enumerate(self.records, start=1):
            result = None
            if isinstance(record, parse.Text) and not (escaped_nul and _has_nul(record)):
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
                if yielding and len(results) - open_chunk == size:
                    yielding = not self.count and admit(self.batch)
                    if yielding:
                        yield results[open_chunk:]
                        open_chunk, size = len(results), CHUNK
        if not index:
            self.count += 1
            errors.append("records: no records in the upload")
        if self.count > len(errors):
            errors.append(f"... and {self.count - len(errors)} more problems "
                          f"({self.count} in all)")
        if yielding and not self.count and len(results) > open_chunk:
            yielding = admit(self.batch)
            if yielding:
                yield results[open_chunk:]
        self.complete = yielding and not self.count


def _has_nul(record: bytes | msgspec.Raw) -> bool:
    return b"\\u0000" in (record if isinstance(record, bytes) else bytes(record))
