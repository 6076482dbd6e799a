"""Long tables a page at a time (Django's Paginator): `?page=N`, or `?page=all` for every
row. HTML and JSON show the same page; a CSV download holds every row."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core.paginator import EmptyPage, PageNotAnInteger, Paginator

from dashboards.state import State

PER_PAGE = 50
ALL = "all"


@dataclass(frozen=True)
class Paging:
    """Where the shown rows are among all of them; `number` is None when all are shown."""

    number: int | None
    pages: int
    count: int
    first: int  # 1-based position of the first row shown (0 when there is none)
    last: int
    urls: dict[str, str]  # "previous", "next", "all", "paged": links to the other views

    def as_filters(self) -> dict[str, Any]:
        return {"page": self.number or ALL, "pages": self.pages, "rows": self.count}


def paged(state: State, rows: Sequence, per_page: int = PER_PAGE) -> tuple[list, Paging]:
    """The rows of the page `?page=` asks for (the first by default), and where they are.
    A page past the last or not a number is the first page, with a note (an error naming
    `page` for JSON and CSV readers)."""
    paginator = Paginator(rows, per_page)
    raw = state.query.get("page", "").strip() or "1"
    if state.csv or raw == ALL:
        shown = list(rows)
        state.values["page"] = ALL
        urls = {"paged": state.url(page=None)} if paginator.num_pages > 1 else {}
        return shown, Paging(None, paginator.num_pages, len(shown), 1 if shown else 0,
                             len(shown), urls)
    try:
        page = paginator.page(raw)
    except (PageNotAnInteger, EmptyPage):
        problem = (f"{raw!r} is not a page number or {ALL!r}" if not raw.isdigit()
                   else f"{raw} is past the last page, {paginator.num_pages}")
        state.fallback("page", problem, 1, f"page: {problem}; showing the first page.")
        page = paginator.page(1)
    state.values["page"] = str(page.number)
    urls = {}
    if page.has_previous():
        urls["previous"] = state.url(page=str(page.previous_page_number()))
    if page.has_next():
        urls["next"] = state.url(page=str(page.next_page_number()))
    if paginator.num_pages > 1:
        urls["all"] = state.url(page=ALL)
    count = paginator.count
    return list(page), Paging(page.number, paginator.num_pages, count,
                              page.start_index() if count else 0, page.end_index(), urls)
