"""Queries and numbers shared by the dashboard pages."""

from __future__ import annotations

import math
from collections.abc import Iterable
from urllib.parse import urlencode

from django.db.models import CharField, Exists, Func, OuterRef
from django.urls import reverse

from benchsite.results.models import Run, RunSummary, Series
from runner.contract.directions import HIGHER


def geomean(values: Iterable[float | None]) -> float | None:
    """Geometric mean of the positive finite values; None when there are none."""
    logs = [math.log(v) for v in values if v is not None and 0 < v < math.inf]
    return math.exp(sum(logs) / len(logs)) if logs else None


def series_options(columns: tuple[str, ...], **filters) -> dict[str, list[str]]:
    """Distinct values of several Series columns among the series matching `filters`, in
    one scan (the series table is thousands of rows where results are millions)."""
    rows = Series.objects.filter(**filters).order_by().values_list(*columns).distinct()
    return {column: sorted({row[i] for row in rows}) for i, column in enumerate(columns)}


def repos_and_benchmarks(repo: str | None = None) -> tuple[list[str], list[str]]:
    """All repos, and the benchmarks of `repo` (every benchmark when None)."""
    pairs = Series.objects.order_by().values_list("repo", "benchmark").distinct()
    pairs = list(pairs)
    return (sorted({r for r, _ in pairs}),
            sorted({b for r, b in pairs if repo is None or r == repo}))


def summary_choices(column: str, **filters) -> list[str]:
    """Distinct values of a RunSummary column among the summaries matching `filters`."""
    values = (RunSummary.objects.filter(**filters)
              .order_by().values_list(column, flat=True).distinct())
    return sorted(value for value in values if value is not None)


def latest_shas(repo: str, benchmark: str, branch: str, limit: int = 120) -> list[tuple]:
    """(sha, time) of the latest commits with results of `benchmark`, newest first."""
    has_benchmark = RunSummary.objects.filter(run=OuterRef("pk"), benchmark=benchmark)
    rows = (Run.objects.filter(repo=repo, head_branch=branch)
            .filter(Exists(has_benchmark)).order_by("-timestamp")
            .values_list("head_sha", "timestamp")[: limit * 10])
    seen: dict[str, object] = {}
    for sha, when in rows:
        if sha not in seen:
            seen[sha] = when
            if len(seen) == limit:
                break
    return list(seen.items())


def change_class(change: float | None, threshold: float, direction: str | None) -> str:
    """CSS class of a relative change: "better"/"worse" beyond the threshold, given which way
    is better for the metric ("higher"/"lower"); "" when within it or unknown."""
    if change is None or direction is None:
        return ""
    better = change if direction == HIGHER else -change
    return "better" if better > threshold else "worse" if better < -threshold else ""


def page_url(route: str, *args, **params) -> str:
    """A page's URL with query parameters, the empty ones left out. `route` is a route name
    ("dashboards:explorer", `args` filling its path) or a path reverse() gave (a table's
    thousand links reverse their route once)."""
    path = route if route.startswith("/") else reverse(route, args=args)
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"{path}?{query}"


def compare_url(repo: str, base: str, head: str, **params) -> str:
    """The comparison page of two commits; "" when they are the same or one is unknown."""
    if not base or not head or base == head:
        return ""
    return page_url("dashboards:compare", base, head, repo=repo, **params)


class IsoUtc(Func):
    """A timestamp as ISO 8601 text in UTC, "2026-11-21T03:00:00+00:00" (whole seconds, as
    results store them), formatted by the database: parsing and formatting the thousands of
    timestamps of a chart in Python costs more than the query."""

    output_field = CharField()

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, template=(
            "to_char(%(expressions)s AT TIME ZONE 'UTC', "
            "'YYYY-MM-DD\"T\"HH24:MI:SS\"+00:00\"')"), **extra)

    def as_sqlite(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection,
                           template="strftime('%%%%Y-%%%%m-%%%%dT%%%%H:%%%%M:%%%%S+00:00', "
                                    "%(expressions)s)", **extra)
