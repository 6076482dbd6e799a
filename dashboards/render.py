"""One response path for every dashboard page: HTML, its JSON (`?format=json`) or one of
its tables as CSV (`?format=csv&table=NAME`, default the first table)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe

from benchsite import csvfile
from dashboards.paging import Paging, paged
from dashboards.state import State

HTML_ROWS = 1000


def format_cell(value: Any) -> str:
    """A table cell: missing values show as missing, never as 0."""
    if value is None or value == "":
        return "—"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:,.0f}"
    return str(value)


class RowsOf(Sequence):
    """Table rows made from `items` only when they are read: a paged table of a year's
    points (thousands) shows fifty."""

    def __init__(self, items: Sequence, row: Callable[[Any], list[Any]]):
        self.items, self.row = items, row

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self.row(item) for item in self.items[index]]
        return self.row(self.items[index])


@dataclass
class Table:
    name: str
    columns: list[str]
    rows: Sequence[list[Any]]  # cells: numbers, text, or None for missing (a list once paged)
    # Per row, by column name (a column's title in `columns`): its cell's link and CSS class.
    links: list[dict[str, str]] = field(default_factory=list)
    classes: list[dict[str, str]] = field(default_factory=list)
    paging: Paging | None = None  # when `rows` is one page of a longer table
    # Columns the HTML leaves out when their cell is the same on every row shown, saying it
    # once above the table instead (the JSON and CSV keep them): a wide table stays readable.
    fold_when_same: tuple[str, ...] = ()
    # A column of long text (a verdict's reason) the HTML shows as a line under its row, the
    # width of the table, instead of as a column (the JSON and CSV keep it a column).
    detail: str = ""
    # Shown by the page's own template (the repro commands: _repro.html), not as a table.
    templated: bool = False

    def as_json(self) -> dict[str, Any]:
        shown = {"name": self.name, "columns": self.columns, "rows": self.rows}
        return shown | ({"paging": self.paging.as_filters()} if self.paging else {})

    def folded(self) -> dict[str, str]:
        """The `fold_when_same` columns with one value on every row shown: name -> value."""
        rows = self.rows[:HTML_ROWS]
        if len(rows) < 2:
            return {}
        same = {}
        for column in self.fold_when_same:
            c = self.columns.index(column)
            values = {format_cell(row[c]) for row in rows}
            if len(values) == 1:
                same[column] = values.pop()
        return same

    def html_columns(self) -> list[str]:
        folded = self.folded()
        return [column for column in self.columns
                if column not in folded and column != self.detail]

    def html_caption(self) -> str:
        """"benchmark: micro-benchmark api · mode: inference" for the folded columns."""
        return " · ".join(f"{column}: {value}" for column, value in self.folded().items())

    def by_column(self) -> list[dict[str, Any]]:
        """The rows as column name -> value, for a template that lays them out itself."""
        return [dict(zip(self.columns, row, strict=False)) for row in self.rows]

    def paged(self, state: State) -> None:
        """Keep the rows of the page `?page=` asks for (every row for a CSV)."""
        positions, self.paging = paged(state, range(len(self.rows)))
        self.rows = [self.rows[i] for i in positions]
        self.links = [self.links[i] for i in positions if i < len(self.links)]
        self.classes = [self.classes[i] for i in positions if i < len(self.classes)]

    def html_body(self) -> str:
        """The table's rows as escaped HTML, at most HTML_ROWS (the CSV has them all).

        Built here rather than in a template loop: thousands of cells render ten times
        faster."""
        if not self.rows:
            return format_html('<tr><td colspan="{}" class="missing">No results for these '
                               "filters.</td></tr>", len(self.columns))
        lines = []
        folded = self.folded()
        for r, row in enumerate(self.rows[:HTML_ROWS]):
            links = self.links[r] if r < len(self.links) else {}
            classes = self.classes[r] if r < len(self.classes) else {}
            cells, detail = [], ""
            for c, value in enumerate(row):
                column = self.columns[c] if c < len(self.columns) else None
                if column in folded:
                    continue
                if column == self.detail:
                    detail = format_html('<tr class="detail"><td colspan="{}">{}: {}</td></tr>',
                                         len(self.html_columns()), column, format_cell(value))
                    continue
                text = escape(format_cell(value))
                if column in links:
                    text = f'<a href="{escape(links[column])}">{text}</a>'
                css = ("missing " if value is None else "") + classes.get(column, "")
                cells.append(f'<td class="{css}">{text}</td>')
            opening = '<tr class="has-detail">' if detail else "<tr>"
            lines.append(opening + "".join(cells) + "</tr>" + detail)
        if len(self.rows) > HTML_ROWS:
            lines.append(format_html(
                '<tr><td colspan="{}" class="missing">{} more rows: download the CSV.</td></tr>',
                len(self.html_columns()), len(self.rows) - HTML_ROWS))
        if self.paging and self.paging.urls:
            lines.append(self._paging_row())
        return mark_safe("\n".join(lines))  # noqa: S308 - every value escaped above


    def _paging_row(self) -> str:
        paging = self.paging
        where = f"Rows {paging.first}–{paging.last} of {paging.count}"
        if paging.number:
            where += f" (page {paging.number} of {paging.pages})"
        labels = {"previous": "previous", "next": "next", "all": "show all",
                  "paged": "show a page at a time"}
        links = [format_html('<a href="{}" rel="{}">{}</a>', paging.urls[name], name, label)
                 for name, label in labels.items() if name in paging.urls]
        return format_html('<tr class="paging"><td colspan="{}">{} · {}</td></tr>',
                           len(self.html_columns()), where, mark_safe(" · ".join(links)))  # noqa: S308 - built by format_html


@dataclass
class Page:
    title: str
    filters: dict[str, Any]  # the page's resolved state, echoed in JSON
    tables: list[Table] = field(default_factory=list)
    figures: list[dict[str, Any]] = field(default_factory=list)  # plotly figure JSON
    context: dict[str, Any] = field(default_factory=dict)  # template-only extras
    data: dict[str, Any] = field(default_factory=dict)  # more top-level keys of the JSON

    def charts(self) -> list[tuple[str, dict[str, Any]]]:
        return [(f"figure-{number}", figure) for number, figure in enumerate(self.figures)]


def respond(request, template: str, page: Page) -> HttpResponse:
    output = request.GET.get("format", "html")
    if output == "json":
        return HttpResponse(_json({"title": page.title, "filters": page.filters,
                                   "tables": [table.as_json() for table in page.tables],
                                   "figures": page.figures, **page.data}),
                            content_type="application/json")
    if output == "csv":
        return _csv(request, page)
    return render(request, template, {"page": page, **page.context})


def _json(value: Any) -> bytes:
    """A page as JSON: orjson (a year of points took the standard library's encoder longer
    than building them), with Django's encoder's text for what orjson leaves to it (dates,
    decimals, lazy text); NaN and infinities as null, which JSON has, not as tokens it
    lacks."""
    return orjson.dumps(value, default=_DJANGO_JSON.default,
                        option=orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_NON_STR_KEYS)


_DJANGO_JSON = DjangoJSONEncoder()


def _csv(request, page: Page) -> HttpResponse:
    wanted = request.GET.get("table") or (page.tables[0].name if page.tables else "")
    table = next((table for table in page.tables if table.name == wanted), None)
    if table is None:
        names = [table.name for table in page.tables]
        return HttpResponse(f"table {wanted!r}: not on this page; tables: {names}",
                            status=400, content_type="text/plain")
    slug = "".join(c if c.isalnum() else "-" for c in f"{page.title}-{table.name}").lower()
    return csvfile.response(f"{slug}.csv", table.columns, table.rows)
