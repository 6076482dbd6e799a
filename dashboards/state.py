"""Page state read from the URL: every page is shareable. A value a page cannot use (a commit
that has gone, a device the chosen repo lacks, a number out of range) is an error naming the
parameter for the page's JSON and CSV, and for its HTML the default, with a note on the page
saying what was reset and why: a page never dead-ends."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpRequest
from django.urls import reverse

RANGES = {"1d": 1, "3d": 3, "7d": 7, "14d": 14, "30d": 30, "90d": 90, "180d": 180,
          "365d": 365}
GRANULARITIES = ("hour", "day", "week", "month")
MACHINE_FORMATS = ("json", "csv")


class BadParameter(ValueError):
    def __init__(self, name: str, problem: str):
        super().__init__(f"{name}: {problem}")
        self.name = name


class State:
    """The request's query parameters as a page reads them; `values` keeps what it read (the
    resolved filters that links to variants of the page carry)."""

    def __init__(self, request: HttpRequest):
        self.request = request  # for what is not in the URL: the user, absolute URLs
        self.query = request.GET
        self.values: dict[str, str] = {}
        self.notes: list[str] = []  # what was reset and why, shown on the HTML page

    @property
    def strict(self) -> bool:
        """JSON and CSV readers get an error for a value they cannot have, never a silently
        different answer; people get the page, with a note."""
        return self.query.get("format") in MACHINE_FORMATS

    def fallback(self, name: str, problem: str, default, note: str):
        """The default in place of an unusable value: `problem` as the error naming `name`
        when strict, else `note` (what was reset to what, and why) on the page."""
        if self.strict:
            raise BadParameter(name, problem)
        self.notes.append(note)
        return default

    @property
    def csv(self) -> bool:
        """A CSV download: a paginated page's table then holds every row, not one page."""
        return self.query.get("format") == "csv"

    def text(self, name: str, default: str = "") -> str:
        value = self.query.get(name, "").strip() or default
        if problem := text_problem(value):
            value = self.fallback(name, problem, default, f"{name}: {problem}; ignored.")
        self.values[name] = value
        return value

    def choice(self, name: str, choices, default: str = "") -> str:
        """A value among `choices`; the default (or the first choice) when none is given."""
        choices = list(choices)
        value = self.query.get(name, "").strip()
        fallback = default if default in choices or not choices else choices[0]
        if not value:
            value = fallback
        elif value not in choices:
            value = self.fallback(name, not_one_of(value, choices), fallback,
                                  f"{name}: {value!r} is not offered here; showing "
                                  f"{fallback or 'all'}.")
        self.values[name] = value
        return value

    def number(self, name: str, default: float, low: float, high: float) -> float:
        raw = self.query.get(name, "").strip()
        try:
            value = float(raw) if raw else default
            problem = "" if low <= value <= high else f"{value:g} is outside {low:g}..{high:g}"
        except ValueError:
            problem = f"{raw!r} is not a number"
        if problem:
            value = self.fallback(name, problem, default,
                                  f"{name}: {problem}; showing {default:g}.")
        self.values[name] = f"{value:g}"
        return value

    def url(self, route: str = "", **changes: str | None) -> str:
        """This page's URL (or the page of another route name, with this page's filters) with
        some parameters changed or dropped."""
        params = {**self.values, **changes}
        path = reverse(route) if route else ""
        return f"{path}?{urlencode({k: v for k, v in params.items() if v not in (None, '')})}"


def not_one_of(value: str, choices: list[str]) -> str:
    shown = ", ".join(map(repr, choices[:20])) + (" ..." if len(choices) > 20 else "")
    return f"{value!r} is not one of {shown}"


def text_problem(value: str) -> str:
    # A NUL never gets here: benchsite.control_characters refuses the request first.
    return "longer than 255 characters" if len(value) > 255 else ""
