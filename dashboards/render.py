"""One response path for every dashboard page: HTML, its JSON (`?format=json`) or one of
its tables as CSV (`?format=csv&table=NAME`, default the first table)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpResponse, JsonResponse
from django.shortcuts import render


@dataclass
class Table:
    name: str
    columns: list[str]
    rows: list[list[Any]]  # cells: numbers, text, or None for missing
    links: list[dict[int, str]] = field(default_factory=list)  # per row: column -> URL
    classes: list[dict[int, str]] = field(default_factory=list)  # per row: column -> CSS class

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "columns": self.columns, "rows": self.rows}

    def html_rows(self) -> list[list[tuple[Any, str, str]]]:
        """Rows of (value, link or "", CSS class) for the template."""
        return [
            [(value,
              (self.links[r] if r < len(self.links) else {}).get(c, ""),
              ("missing " if value is None else "")
              + (self.classes[r] if r < len(self.classes) else {}).get(c, ""))
             for c, value in enumerate(row)]
            for r, row in enumerate(self.rows)
        ]


@dataclass
class Page:
    title: str
    filters: dict[str, Any]  # the page's resolved state, echoed in JSON
    tables: list[Table] = field(default_factory=list)
    figures: list[dict[str, Any]] = field(default_factory=list)  # plotly figure JSON
    context: dict[str, Any] = field(default_factory=dict)  # template-only extras

    def charts(self) -> list[tuple[str, dict[str, Any]]]:
        return [(f"figure-{number}", figure) for number, figure in enumerate(self.figures)]


def respond(request, template: str, page: Page) -> HttpResponse:
    output = request.GET.get("format", "html")
    if output == "json":
        return JsonResponse({"title": page.title, "filters": page.filters,
                             "tables": [table.as_json() for table in page.tables],
                             "figures": page.figures})
    if output == "csv":
        return _csv(request, page)
    return render(request, template, {"page": page, **page.context})


def _csv(request, page: Page) -> HttpResponse:
    wanted = request.GET.get("table") or (page.tables[0].name if page.tables else "")
    table = next((table for table in page.tables if table.name == wanted), None)
    if table is None:
        names = [table.name for table in page.tables]
        return HttpResponse(f"table {wanted!r}: not on this page; tables: {names}",
                            status=400, content_type="text/plain")
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(table.columns)
    writer.writerows(["" if cell is None else cell for cell in row] for row in table.rows)
    response = HttpResponse(buffer.getvalue(), content_type="text/csv")
    slug = "".join(c if c.isalnum() else "-" for c in f"{page.title}-{table.name}").lower()
    response["Content-Disposition"] = f'attachment; filename="{slug}.csv"'
    return response
