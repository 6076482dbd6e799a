"""Explorer: any benchmark's series, filtered, with a summary table and a chart per metric."""

from __future__ import annotations

from django.urls import reverse

from benchsite.results.models import Result, Series
from dashboards import charts
from dashboards.pages.common import IsoUtc, change_class, repos_and_benchmarks, series_options
from dashboards.render import Page, Table
from dashboards.state import State
from runner.contract.directions import direction

MAX_SERIES = 40
FILTERS = ("metric", "backend", "mode", "dtype", "suite", "device", "arch", "compile_mode")
LABEL_PARTS = ("model", "backend", "mode", "dtype", "arch", "compile_mode")


def build(state: State) -> Page:
    repos, _ = repos_and_benchmarks()
    repo = state.choice("repo", repos, default="pytorch/ao")
    benchmarks = repos_and_benchmarks(repo)[1]
    benchmark = state.choice("benchmark", benchmarks)
    scope = {"repo": repo, "benchmark": benchmark}
    options = series_options(FILTERS, **scope)
    chosen = {name: state.choice(name, ["", *options[name]], default="") for name in FILTERS}
    model = state.text("model")
    branch = state.text("branch", "main")
    start, end = state.time_range()
    threshold = state.number("threshold", 5, 0, 100) / 100

    matching = Series.objects.filter(**scope, **{k: v for k, v in chosen.items() if v})
    if model:
        matching = matching.filter(model=model)
    total = matching.count()
    series = list(matching.order_by("metric", "model", "backend", "dtype", "arch", "id")
                  .only(*LABEL_PARTS, "metric", "device")[:MAX_SERIES])
    points: dict[int, list[tuple]] = {item.pk: [] for item in series}
    results = (Result.objects.filter(series_id__in=points, timestamp__gte=start,
                                     timestamp__lt=end, run__head_branch=branch)
               .order_by("series_id", "timestamp")
               .values_list("series_id", IsoUtc("timestamp"), "value", "target",
                            "run__head_sha", "run_id", "string_values"))
    for row in results:
        points[row[0]].append(row[1:])

    varying = [part for part in LABEL_PARTS
               if len({getattr(item, part) for item in series}) > 1] or ["model"]
    names = {item.pk: " / ".join(str(getattr(item, part)) or "-" for part in varying)
             for item in series}
    return Page(
        title="Explorer",
        filters={"repo": repo, "benchmark": benchmark, "model": model, "branch": branch,
                 "start": start.isoformat(), "end": end.isoformat(), **chosen,
                 "series": total, "shown": len(series)},
        tables=[_summary(series, points, names, threshold, benchmark)],
        figures=_charts(series, points, names),
        context={"options": options, "chosen": chosen, "total": total,
                 "shown": len(series), "repos": repos, "benchmarks": benchmarks},
    )


def _charts(series, points, names) -> list[dict]:
    by_metric: dict[str, list] = {}
    for item in series:
        rows = points[item.pk]
        by_metric.setdefault(item.metric, []).append({
            "name": names[item.pk],
            "x": [row[0] for row in rows],
            "y": [row[1] for row in rows],
            "text": [f"{row[3][:10]}" + (f" {row[5][0]}" if row[5] else "") for row in rows],
        })
    return [charts.lines(metric, lines, metric) for metric, lines in by_metric.items()]


def _summary(series, points, names, threshold, benchmark) -> Table:
    table = Table("series", ["series", "metric", "latest", "previous", "change %", "target",
                             "% of target", "points", "latest commit"], [])
    for item in series:
        rows = points[item.pk]
        latest = rows[-1] if rows else None
        previous = rows[-2] if len(rows) > 1 else None
        value = latest[1] if latest else None
        before = previous[1] if previous else None
        change = (value / before - 1) if value is not None and before else None
        target = latest[2] if latest else None
        shown = value if value is not None or not latest or not latest[5] else latest[5][0]
        table.rows.append([
            names[item.pk], item.metric, shown, before,
            None if change is None else round(100 * change, 2), target,
            round(100 * value / target, 1) if value is not None and target else None,
            len(rows), latest[3][:10] if latest else None,
        ])
        better = direction(item.metric, benchmark).better
        table.classes.append({4: change_class(change, threshold, better)})
        table.links.append({8: reverse("dashboards:run", args=[latest[4]])} if latest else {})
    return table

