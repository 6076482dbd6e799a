"""Every dropdown of every dashboard page, changed one at a time from the page's default URL
as a browser would submit the filter form, answers 200 with a chart that has points, a table
with rows, or an explicit empty state (`class="empty"`): filter state never dead-ends.

On the short demo with a CPU smoke job (conftest.py)."""

from __future__ import annotations

import json
import math
from html.parser import HTMLParser
from urllib.parse import urlencode

import pytest

from benchsite.results.demo import sha
from benchsite.results.models import Run

MAX_OPTIONS = 6  # options tried per dropdown: spread over its list, first and last included


class FilterForm(HTMLParser):
    """The filter form (`id="filters"`) of a page: its fields as a browser would submit
    them, and each dropdown's options."""

    def __init__(self, html: str):
        super().__init__()
        self.inside = False
        self.fields: list[tuple[str, str]] = []  # (name, value) in document order
        self.selects: dict[str, list[str]] = {}
        self.select: str | None = None
        self.selected: str | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and attrs.get("id") == "filters":
            self.inside = True
        if not self.inside or "disabled" in attrs:
            return
        if tag == "select":
            self.select, self.selected = attrs["name"], None
            self.selects[self.select] = []
        elif tag == "option" and self.select:
            value = attrs.get("value", "")
            self.selects[self.select].append(value)
            if "selected" in attrs or self.selected is None:
                self.selected = value  # a browser submits the first option when none is
        elif tag == "input" and attrs.get("name"):
            kind = attrs.get("type", "text")
            if kind not in ("checkbox", "radio") or "checked" in attrs:
                self.fields.append((attrs["name"], attrs.get("value", "")))

    def handle_endtag(self, tag):
        if tag == "select" and self.select:
            self.fields.append((self.select, self.selected or ""))
            self.select = None
        elif tag == "form":
            self.inside = False

    def submit(self, name: str, value: str) -> str:
        """The query a browser sends with `name` changed to `value` (dashboards.js leaves
        out empty fields)."""
        pairs = [(field, value if field == name else current)
                 for field, current in self.fields]
        return urlencode([(field, current) for field, current in pairs if current != ""])


def spread(options: list[str]) -> list[str]:
    if len(options) <= MAX_OPTIONS:
        return options
    step = (len(options) - 1) / (MAX_OPTIONS - 1)
    return [options[round(i * step)] for i in range(MAX_OPTIONS)]


class Content(HTMLParser):
    """What a page shows: chart points, table rows, and empty-state messages."""

    def __init__(self, html: str):
        super().__init__()
        self.points = self.rows = 0
        self.empty: list[str] = []
        self.script = self.body = self.in_empty = False
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script" and attrs.get("type") == "application/json":
            self.script = True
        elif tag == "tbody":
            self.body = True
        elif tag == "tr" and self.body:
            self.rows += 1
        if "empty" in (attrs.get("class") or "").split():
            self.in_empty = True
            self.empty.append("")

    def handle_endtag(self, tag):
        if tag == "tbody":
            self.body = False
        elif tag == "script":
            self.script = False
        elif tag == "p":
            self.in_empty = False

    def handle_data(self, data):
        if self.script:
            self.points += _points(json.loads(data))
        elif self.body and "No results for these filters." in data:
            self.rows -= 1  # the table's own empty row is not a result
        if self.in_empty:
            self.empty[-1] += data


def _points(figure: dict) -> int:
    count = 0
    for trace in figure.get("data", []):
        values = trace.get("z") or [trace.get("y") or []]
        count += sum(1 for row in values for value in row
                     if isinstance(value, int | float) and math.isfinite(value))
    return count


def default_urls() -> list[str]:
    run = Run.objects.filter(repo="pytorch/ao", head_sha=sha(7)).latest("timestamp")
    return ["/", "/quantization/", "/trends/", "/explorer/", "/compilers/",
            "/compilers/models/", "/instructions/", "/kernels/",
            f"/compare/{sha(6)}...{sha(7)}?repo=pytorch/ao", f"/runs/{run.pk}/",
            "/regressions/", "/recipes/"]


PAGES = ["home", "quantization", "trends", "explorer", "compilers", "compiler models",
         "instructions", "kernels", "compare", "run", "regressions", "recipes"]


def shows_something(html: str) -> bool:
    content = Content(html)
    return content.points > 0 or content.rows > 0 or any(text.strip() for text in content.empty)


@pytest.mark.django_db
@pytest.mark.parametrize("number", range(len(PAGES)), ids=PAGES)
def test_every_dropdown_change_answers_a_page(client, short_demo, number):
    url = default_urls()[number]
    response = client.get(url)
    assert response.status_code == 200, (url, response.content[:300])
    html = response.content.decode()
    assert shows_something(html), f"{url}: no chart points, no table rows, no empty state"
    form = FilterForm(html)
    path = url.split("?")[0]
    failures = []
    for name, options in form.selects.items():
        current = dict(form.fields).get(name)
        for value in spread([option for option in options if option != current]):
            changed = f"{path}?{form.submit(name, value)}"
            answer = client.get(changed)
            if answer.status_code != 200:
                failures.append(f"{changed}: {answer.status_code} "
                                f"{answer.content.decode()[:200]!r}")
            elif not shows_something(answer.content.decode()):
                failures.append(f"{changed}: no chart points, no table rows, no empty state")
    assert not failures, f"{len(failures)} dropdown changes failed:\n" + "\n".join(failures)
