"""The one CSV writer of the site: API result streams, dashboard tables, regression lists.

Every value from an upload (benchmark, model and metric names...) is untrusted: a cell that
starts with "=", "+", "-", "@", a tab or a carriage return is run as a formula by
spreadsheets (CSV injection, OWASP), so such text is written with a leading apostrophe.
Numbers are written as numbers (a negative change stays -3.2), lists and objects as JSON,
missing values as empty cells. A download either completes or is an error response: the
work that can fail (a streamed query) starts before the response's first byte.
"""

from __future__ import annotations

import csv
import itertools
import json
from collections.abc import Iterable, Iterator
from typing import Any

import orjson
from django.http import HttpResponse, StreamingHttpResponse

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str):
        return "'" + value if value.startswith(FORMULA_STARTS) else value
    if isinstance(value, list | dict):
        try:
            return cell(orjson.dumps(value).decode())
        except orjson.JSONEncodeError:  # an integer beyond 64 bits, stored before they were refused
            return cell(json.dumps(value))
    return value


class _Echo:
    def write(self, value: str) -> str:
        return value


def lines(columns: Iterable[str], rows: Iterable[Iterable[Any]]) -> Iterator[str]:
    """The CSV text, a line at a time (for streaming)."""
    writer = csv.writer(_Echo())
    yield writer.writerow([cell(column) for column in columns])
    for row in rows:
        yield writer.writerow([cell(value) for value in row])


def response(filename: str, columns: Iterable[str], rows: Iterable[Iterable[Any]],
             stream: bool = False) -> HttpResponse | StreamingHttpResponse:
    """A CSV download; `stream` for row sources too large to hold (a queryset iterator)."""
    content = lines(columns, started(rows))
    made = (StreamingHttpResponse(content, content_type="text/csv") if stream
            else HttpResponse("".join(content), content_type="text/csv"))
    made["Content-Disposition"] = f'attachment; filename="{filename}"'
    return made


def started(rows: Iterable[Iterable[Any]]) -> Iterator[Iterable[Any]]:
    """`rows` with its first row already read, so that a query that fails does so here,
    before a streamed response has sent anything, not after its first rows."""
    rows = iter(rows)
    first = next(rows, None)
    return rows if first is None else itertools.chain((first,), rows)
