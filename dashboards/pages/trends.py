"""Trends page: geomean of a metric per recipe (or backend) over time, and passrate."""

from __future__ import annotations

import math
from datetime import UTC

from django.db.models import Count, Sum
from django.db.models.functions import Trunc

from benchsite.results.models import RunSummary
from dashboards import charts
from dashboards.pages.common import page_url, repos_and_benchmarks, series_options
from dashboards.render import Page, Table
from dashboards.state import GRANULARITIES, State

GROUPS = ("dtype", "backend", "suite", "arch", "compile_mode", "mode")
FILTERS = ("arch", "mode", "dtype", "backend", "suite", "compile_mode")
ACCURACY = "accuracy"


def _default_metric(metrics: list[str]) -> str:
    return next((m for m in metrics if "speedup" in m.lower()), metrics[0] if metrics else "")


def build(state: State) -> Page:
    repos, _ = repos_and_benchmarks()
    repo = state.choice("repo", repos, default="pytorch/ao")
    benchmarks = repos_and_benchmarks(repo)[1]
    benchmark = state.choice("benchmark", benchmarks)
    scope = {"repo": repo, "benchmark": benchmark}
    options = series_options(("metric", *FILTERS), **scope)
    metrics = [m for m in options.pop("metric") if m != ACCURACY]
    metric = state.choice("metric", metrics, default=_default_metric(metrics))
    group = state.choice(
        "group", GROUPS,
        default="backend" if len([b for b in options["backend"] if b]) > 1 else "dtype")
    branch = state.text("branch", "main")
    granularity = state.choice("granularity", GRANULARITIES, default="day")
    start, end = state.time_range()
    chosen = {name: state.choice(name, ["", *options[name]], default="") for name in FILTERS}

    summaries = RunSummary.objects.filter(
        **scope, branch=branch, timestamp__gte=start, timestamp__lt=end,
        **{name: value for name, value in chosen.items() if value},
    )
    points = _aggregate(summaries.filter(metric=metric), group, granularity,
                        log_sum=Sum("log_sum"), log_count=Sum("log_count"))
    passes = _aggregate(summaries.filter(metric=ACCURACY), group, granularity,
                        passed=Sum("pass_count"), total=Sum("string_count"))
    buckets = sorted({row["bucket"] for row in points} | {row["bucket"] for row in passes})

    figures = [_chart(f"Geomean {metric} by {group}", points, group, buckets, metric,
                      lambda row: math.exp(row["log_sum"] / row["log_count"])
                      if row["log_count"] else None, "log_count")]
    tables = [_latest(state, points, group, metric, benchmark, repo)]
    if passes:
        figures.append(_chart(f"Passrate by {group}", passes, group, buckets, "passrate (%)",
                              lambda row: 100 * row["passed"] / row["total"]
                              if row["total"] else None, "total"))
    tables.append(_points_table(points, passes, group))
    return Page(
        title="Trends",
        filters={"repo": repo, "benchmark": benchmark, "metric": metric, "group": group,
                 "branch": branch, "granularity": granularity, "start": start.isoformat(),
                 "end": end.isoformat(), **chosen},
        tables=tables, figures=figures,
        context={"options": options, "metrics": metrics, "groups": GROUPS,
                 "granularities": GRANULARITIES, "chosen": chosen,
                 "repos": repos, "benchmarks": benchmarks},
    )


def _aggregate(summaries, group: str, granularity: str, **totals) -> list[dict]:
    return list(
        summaries.annotate(bucket=Trunc("timestamp", granularity, tzinfo=UTC))
        .values("bucket", group)
        .annotate(runs=Count("run", distinct=True), **totals)
        .order_by("bucket", group)
    )


def _chart(title, rows, group, buckets, y_title, value_of, count_field) -> dict:
    by_group: dict[str, dict] = {}
    for row in rows:
        by_group.setdefault(row[group] or "(none)", {})[row["bucket"]] = row
    series = []
    for name, found in sorted(by_group.items()):
        cells = [found.get(bucket) for bucket in buckets]
        series.append({
            "name": name,
            "x": [bucket.isoformat() for bucket in buckets],
            "y": [value_of(cell) if cell else None for cell in cells],
            "text": [f"{cell[count_field]} points, {cell['runs']} runs" if cell else "missing"
                     for cell in cells],
        })
    return charts.lines(title, series, y_title)


def _latest(state, rows, group, metric, benchmark, repo) -> Table:
    """Per group: the first and the latest geomean of the range, and the change."""
    first: dict[str, dict] = {}
    last: dict[str, dict] = {}
    for row in rows:
        if row["log_count"]:
            first.setdefault(row[group], row)
            last[row[group]] = row
    table = Table("summary", [group, "first", "latest", "change %", "latest points",
                              "latest at"], [])
    for name in sorted(last):
        a, b = first[name], last[name]
        ga, gb = (math.exp(r["log_sum"] / r["log_count"]) for r in (a, b))
        table.rows.append([name, ga, gb, round(100 * (gb / ga - 1), 2), b["log_count"],
                           b["bucket"].isoformat()])
        table.links.append({0: page_url("dashboards:explorer", repo=repo,
                                        benchmark=benchmark, metric=metric,
                                        branch=state.values["branch"], **{group: name},
                                        range="90d")})
    return table


def _points_table(points, passes, group) -> Table:
    passrates = {(row["bucket"], row[group]): row for row in passes}
    table = Table("points", ["time", group, "geomean", "points", "runs", "passrate %",
                             "pass / total"], [])
    for row in points:
        passed = passrates.get((row["bucket"], row[group]))
        table.rows.append([
            row["bucket"].isoformat(), row[group],
            math.exp(row["log_sum"] / row["log_count"]) if row["log_count"] else None,
            row["log_count"], row["runs"],
            round(100 * passed["passed"] / passed["total"], 2) if passed and passed["total"]
            else None,
            f"{passed['passed']}/{passed['total']}" if passed else None,
        ])
    return table
