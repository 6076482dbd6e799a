"""Page state read from the URL: every page is shareable, and a bad value is an error that
names the parameter rather than a silently different page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from django.http import HttpRequest
from django.urls import reverse

from benchsite import dates

RANGES = {"1d": 1, "3d": 3, "7d": 7, "14d": 14, "30d": 30, "90d": 90, "180d": 180,
          "365d": 365}
GRANULARITIES = ("hour", "day", "week", "month")


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

    @property
    def csv(self) -> bool:
        """A CSV download: a paginated page's table then holds every row, not one page."""
        return self.query.get("format") == "csv"

    def text(self, name: str, default: str = "") -> str:
        value = self.query.get(name, "").strip() or default
        if len(value) > 255:
            raise BadParameter(name, "longer than 255 characters")
        if "\0" in value:
            raise BadParameter(name, "contains a NUL character, which no text column holds")
        self.values[name] = value
        return value

    def choice(self, name: str, choices, default: str = "") -> str:
        """A value among `choices`; the default (or the first choice) when none is given."""
        choices = list(choices)
        value = self.query.get(name, "").strip()
        if not value:
            value = default if default in choices or not choices else choices[0]
        elif value not in choices:
            shown = ", ".join(map(repr, choices[:20])) + (" ..." if len(choices) > 20 else "")
            raise BadParameter(name, f"{value!r} is not one of {shown}")
        self.values[name] = value
        return value

    def number(self, name: str, default: float, low: float, high: float) -> float:
        raw = self.query.get(name, "").strip()
        try:
            value = float(raw) if raw else default
        except ValueError:
            raise BadParameter(name, f"{raw!r} is not a number") from None
        if not low <= value <= high:
            raise BadParameter(name, f"{value:g} is outside {low:g}..{high:g}")
        self.values[name] = f"{value:g}"
        return value

    def flag(self, name: str, default: bool) -> bool:
        raw = self.query.get(name)
        value = default if raw is None else raw in ("1", "on", "true", "yes")
        self.values[name] = "1" if value else "0"
        return value

    def time_range(self) -> tuple[datetime, datetime]:
        """`range` (1d .. 365d, default 30d) or a custom `start`/`end` (ISO dates)."""
        start, end = self.query.get("start", "").strip(), self.query.get("end", "").strip()
        if start or end:
            begin = _date("start", start) if start else None
            finish = _date("end", end) + timedelta(days=1) if end else datetime.now(UTC)
            if begin is None:
                begin = finish - timedelta(days=30)
            if begin >= finish:
                raise BadParameter("start", "must be before end")
            self.values.update(start=start, end=end, range="custom")
            return begin, finish
        key = self.choice("range", RANGES, default="30d")
        return datetime.now(UTC) - timedelta(days=RANGES[key]), datetime.now(UTC)

    def url(self, route: str = "", **changes: str | None) -> str:
        """This page's URL (or the page of another route name, with this page's filters) with
        some parameters changed or dropped."""
        params = {**self.values, **changes}
        path = reverse(route) if route else ""
        return f"{path}?{urlencode({k: v for k, v in params.items() if v not in (None, '')})}"


def _date(name: str, raw: str) -> datetime:
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        raise BadParameter(name, f"{raw!r} is not a date (YYYY-MM-DD)") from None
    if reason := dates.problem(value):
        raise BadParameter(name, reason)
    return value if value.tzinfo else value.replace(tzinfo=UTC)
