"""Trends page: geomean of a metric per recipe (or backend) over time, and passrate."""

from __future__ import annotations

import math
from datetime import UTC

from django.db.models import Count, Min, Sum
from django.db.models.functions import Trunc

from benchsite.results import environment_marks
from benchsite.results.models import RunSummary
from dashboards import charts
from dashboards.choices import slice_choices, slice_options
from dashboards.filters import (
    ALL,
    AnyBenchmark,
    TimeRange,
    busiest_arch,
    choice,
    column_name,
    headline_metric,
    pairs,
)
from dashboards.pages.common import IsoUtc, page_url, plain_rows
from dashboards.render import Page, RowsOf, Table
from dashboards.state import GRANULARITIES, State

GROUPS = ("dtype", "backend", "suite", "arch", "compile_mode", "mode")
FACETS = ("mode", "dtype", "backend", "suite", "compile_mode")
ACCURACY = "accuracy"


class TrendFilters(AnyBenchmark, TimeRange):
    """Repo -> benchmark -> branch -> metric, device, lines and facets. A line never
    averages devices: one device (default the busiest), or a line per device."""

    repo = choice("Repo")
    benchmark = choice("Benchmark")
    branch = choice("Branch")
    metric = choice("Metric")
    arch = choice("Device")
    group = choice("Lines per")
    granularity = choice("Granularity", choices=pairs(list(GRANULARITIES)), initial="day")
    mode = choice("mode")
    dtype = choice("dtype")
    backend = choice("backend")
    suite = choice("suite")
    compile_mode = choice("compile mode")
    field_order = ["repo", "benchmark", "branch", "metric", "arch", "group", "granularity",
                   "range", "start", "end", *FACETS]
    parents = {"benchmark": ("repo",), "branch": ("repo", "benchmark"),
               "metric": ("repo", "benchmark"), "arch": ("repo", "benchmark", "branch"),
               **{facet: ("repo", "benchmark") for facet in FACETS}}
    facets = FACETS

    def options_metric(self, values):
        self.options = slice_options(("metric", *FACETS), repo=values["repo"],
                                     benchmark=values["benchmark"])
        return pairs([m for m in self.options["metric"] if m != ACCURACY])

    def facet_options(self, name, values):
        self.fields[name].label = column_name(values["benchmark"], name)
        return [("", "all"), *pairs(self.options[name])]

    def default_metric(self, values, choices):
        return headline_metric(values["benchmark"], choices)

    def options_arch(self, values):
        archs = slice_choices("arch", repo=values["repo"], benchmark=values["benchmark"],
                                branch=values["branch"])
        return [(ALL, "all devices, a line each"), *pairs(archs)]

    def default_arch(self, values, choices):
        return busiest_arch(values["repo"], values["benchmark"], choices[1:])

    def options_group(self, values):
        return [(group, column_name(values["benchmark"], group)) for group in GROUPS]

    def default_group(self, values, choices):
        backends = [backend for backend in self.options["backend"] if backend]
        return "backend" if len(backends) > 1 else "dtype"


def build(state: State) -> Page:
    form = TrendFilters(state)
    chosen = form.values
    repo, benchmark, metric, group = (chosen[name] for name in
                                      ("repo", "benchmark", "metric", "group"))
    start, end = form.window()
    facets = {name: chosen[name] for name in FACETS if chosen[name]}
    arch = chosen["arch"] if chosen["arch"] != ALL else ""
    # one device, or a line per device: never a geomean over several
    keys = (group,) if group == "arch" or arch else (group, "arch")

    summaries = RunSummary.objects.filter(
        repo=repo, benchmark=benchmark, branch=chosen["branch"], timestamp__gte=start,
        timestamp__lt=end, **facets, **({"arch": arch} if arch else {}))
    points = _aggregate(summaries.filter(metric=metric), keys, chosen["granularity"],
                        log_sum=Sum("log_sum"), log_count=Sum("log_count"))
    passes = _aggregate(summaries.filter(metric=ACCURACY), keys, chosen["granularity"],
                        passed=Sum("pass_count"), total=Sum("string_count"))
    buckets = sorted({row["bucket"] for row in points} | {row["bucket"] for row in passes})

    lines = " / ".join(column_name(benchmark, key) for key in keys)
    on = f" on {arch}" if arch else ""
    figures = [_chart(f"Geomean {metric} by {lines}{on}", points, buckets, metric,
                      lambda row: math.exp(row["log_sum"] / row["log_count"])
                      if row["log_count"] else None, "log_count", chosen["granularity"])]
    tables = [_latest(state, points, lines, group, metric, benchmark, repo)]
    if passes:
        figures.append(_chart(f"Passrate by {lines}{on}", passes, buckets, "passrate (%)",
                              lambda row: 100 * row["passed"] / row["total"]
                              if row["total"] else None, "total",
                              chosen["granularity"]))
    _mark_environment(figures, repo, chosen["branch"], start, end,
                      [arch] if arch else sorted({row["arch"] for row in points + passes}))
    tables.append(_points_table(points, passes, lines))
    tables[-1].paged(state)  # a line's points per day over 90 days: hundreds of rows
    return Page(
        title="Trends",
        filters={**state.values, "start": start.isoformat(), "end": end.isoformat()},
        tables=tables, figures=figures if points or passes else [],
        context={"form": form, "empty": not points and not passes},
    )


def _mark_environment(figures, repo, branch, start, end, archs) -> None:
    """Mark the environment changes on the charted devices (their arch in the label when
    a line each)."""
    changes = environment_marks.changes_for(repo, branch, start, end, archs)
    for figure in figures:
        environment_marks.mark(figure, changes, archs)


def _aggregate(summaries, keys: tuple[str, ...], granularity: str, **totals) -> list[dict]:
    """Per time bucket (its start as ISO text in UTC, made by the database: a year of days
    over 16 lines is 6,000 rows, whose datetimes cost more to convert than to query) and
    line: the totals, with the line's name (its key values). Grouped by the bucket's time
    and formatted once a group, from the group's earliest time: formatted for every row
    and grouped as text, a year of days took 14 ms of SQL at 10M results, now 8."""
    rows = plain_rows(
        summaries.annotate(start=Trunc("timestamp", granularity, tzinfo=UTC))
        .values("start", *keys)
        .annotate(bucket=IsoUtc(Trunc(Min("timestamp"), granularity, tzinfo=UTC)),
                  runs=Count("run", distinct=True), **totals)
        .order_by("start", *keys)
    )
    for row in rows:
        del row["start"]
        row["line"] = " · ".join([row[key] or "(none)" for key in keys])
    return rows


def _chart(title, rows, buckets, y_title, value_of, count_field, granularity) -> dict:
    """A line a group over the buckets. A year of days is 341 points a line: each point's
    time is sent as short as its granularity allows, its value to 6 significant digits (a
    geomean, charted) and its counts as numbers for the hover template."""
    by_group: dict[str, dict] = {}
    for row in rows:
        by_group.setdefault(row["line"], {})[row["bucket"]] = row
    x = [_chart_time(bucket, granularity) for bucket in buckets]
    series = []
    for name, found in sorted(by_group.items()):
        y, customdata = [], []
        for cell in map(found.get, buckets):
            if cell is None:
                y.append(None)
                customdata.append(None)
            else:
                value = value_of(cell)
                y.append(None if value is None else float(f"{value:.6g}"))
                customdata.append((cell[count_field], cell["runs"]))
        series.append({"name": name, "x": x, "y": y, "customdata": customdata,
                       "hover": "%{customdata[0]} points, %{customdata[1]} runs"})
    return charts.lines(title, series, y_title)


def _chart_time(bucket: str, granularity: str) -> str:
    """'2026-10-28T05:00:00+00:00' as plotly reads it in UTC: '2026-10-28 05:00' by the
    hour, '2026-10-28' by the day or longer."""
    return bucket[:16].replace("T", " ") if granularity == "hour" else bucket[:10]


def _latest(state, rows, lines, group, metric, benchmark, repo) -> Table:
    """Per line: the first and the latest geomean of the range, and the change."""
    first: dict[str, dict] = {}
    last: dict[str, dict] = {}
    for row in rows:
        if row["log_count"]:
            first.setdefault(row["line"], row)
            last[row["line"]] = row
    table = Table("summary", [lines, "first", "latest", "change %", "latest points",
                              "latest at"], [])
    for name in sorted(last):
        a, b = first[name], last[name]
        ga, gb = (math.exp(r["log_sum"] / r["log_count"]) for r in (a, b))
        table.rows.append([name, ga, gb, round(100 * (gb / ga - 1), 2), b["log_count"],
                           b["bucket"]])
        table.links.append({lines: page_url(
            "dashboards:explorer", repo=repo, benchmark=benchmark, metric=metric,
            branch=state.values["branch"], range="90d",
            **{"arch": b.get("arch") or state.values["arch"], group: b[group]})})
    return table


def _points_table(points, passes, lines) -> Table:
    """A row a point, made only for the page of rows shown (`Table.paged`)."""
    passrates = {(row["bucket"], row["line"]): row for row in passes}

    def row_of(row: dict) -> list:
        passed = passrates.get((row["bucket"], row["line"]))
        return [
            row["bucket"], row["line"],
            math.exp(row["log_sum"] / row["log_count"]) if row["log_count"] else None,
            row["log_count"], row["runs"],
            round(100 * passed["passed"] / passed["total"], 2) if passed and passed["total"]
            else None,
            f"{passed['passed']}/{passed['total']}" if passed else None,
        ]

    return Table("points", ["time", lines, "geomean", "points", "runs", "passrate %",
                            "pass / total"], RowsOf(points, row_of))
