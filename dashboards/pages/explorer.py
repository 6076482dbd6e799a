"""Explorer: any benchmark's series, filtered, with a summary table and a chart per metric."""

from __future__ import annotations

from operator import itemgetter

import orjson
from django import forms
from django.db.models import OuterRef, Subquery
from django.urls import reverse

from benchsite.comparison.directions import metric_directions
from benchsite.results import environment_marks
from benchsite.results.models import Result, Series
from dashboards import charts
from dashboards.choices import slice_options
from dashboards.filters import (
    ALL,
    AnyBenchmark,
    TimeRange,
    busiest_arch,
    choice,
    column_name,
    headline_metric,
    pairs,
    percent,
    short_sha,
)
from dashboards.identity import ExtraField, identity_columns, with_extra
from dashboards.pages.common import (
    IsoUtc,
    change_class,
    plain_tuples,
)
from dashboards.render import Page, Table
from dashboards.state import State

MAX_LINES = 12  # series shown: the ones that changed most over the range
RANKED = 500  # series ranked by their change (the first by name, where more match)
FACETS = ("backend", "mode", "dtype", "suite", "device", "compile_mode")
READ = ("model", "backend", "mode", "dtype", "arch", "compile_mode")  # of each series shown
# A point as read: (series id, ISO time, value, target, commit, run id, string results as JSON text)
TIME, VALUE, TARGET, SHA, RUN, STRINGS = range(1, 7)


class ExplorerFilters(AnyBenchmark, TimeRange):
    """Repo -> benchmark -> branch -> metric and device (default the headline metric on the
    busiest device; every metric of a model drilled into) -> facets."""

    repo = choice("Repo")
    benchmark = choice("Benchmark")
    branch = choice("Branch")
    model = forms.CharField(label="Model", required=False, max_length=255,
                            widget=forms.TextInput(attrs={"size": 24,
                                                          "placeholder": "exact name"}))
    extra = ExtraField(label="Extra", required=False, max_length=255,
                       widget=forms.TextInput(attrs={"size": 24, "placeholder": "key=value"}))
    metric = choice("Metric")
    arch = choice("Device")
    backend = choice("backend")
    mode = choice("mode")
    dtype = choice("dtype")
    suite = choice("suite")
    device = choice("device type")
    compile_mode = choice("compile mode")
    threshold = percent("Threshold %", 5, 0.5)
    field_order = ["repo", "benchmark", "branch", "model", "extra", "metric", "arch", *FACETS,
                   "range", "start", "end", "threshold"]
    parents = {"benchmark": ("repo",), "branch": ("repo", "benchmark"),
               "metric": ("repo", "benchmark"), "arch": ("repo", "benchmark", "branch"),
               **{facet: ("repo", "benchmark") for facet in FACETS}}
    facets = FACETS

    def options_metric(self, values):
        self.options = slice_options(("metric", "arch", *FACETS), repo=values["repo"],
                                     benchmark=values["benchmark"])
        return [(ALL, "all metrics"), *pairs(self.options["metric"])]

    def default_metric(self, values, choices):
        return ALL if values["model"] else headline_metric(values["benchmark"], choices[1:])

    def options_arch(self, values):
        return [(ALL, "all devices"), *pairs(self.options["arch"])]

    def default_arch(self, values, choices):
        return busiest_arch(values["repo"], values["benchmark"], choices[1:])

    def facet_options(self, name, values):
        self.fields[name].label = column_name(values["benchmark"], name)
        return [("", "all"), *pairs(self.options[name])]


def build(state: State) -> Page:
    form = ExplorerFilters(state)
    chosen = form.values
    benchmark = chosen["benchmark"]
    start, end = form.window()
    filters = {name: chosen[name] for name in ("model", "metric", "arch", *FACETS)
               if chosen[name] not in ("", ALL)}
    matching = Series.objects.filter(repo=chosen["repo"], benchmark=benchmark, **filters)
    if chosen["extra"]:
        matching = with_extra(matching, chosen["extra"])
    total = matching.count()
    # named rows, not Series instances (this query 11-14 ms at 10M results, 15-19 ms so)
    candidates = list(matching.order_by("metric", "model", "backend", "dtype", "arch", "id")
                      .values_list("pk", *READ, "metric", "device", named=True)[:RANKED])
    in_range = Result.objects.stored().filter(timestamp__gte=start, timestamp__lt=end,
                                              run__head_branch=chosen["branch"])
    series = _most_changed(candidates, in_range)
    points: dict[int, list[tuple]] = {item.pk: [] for item in series}
    # a year of 12 lines is 4,000 points: read without Django's converters (`plain_tuples`),
    # kept as read (indexed by TIME, VALUE...; string results stay JSON text until shown),
    # and put in order of time here (they come nearly so, a month's partition after
    # another: 0.3 ms, where the database's sort took 3.5 ms at 10M results)
    for row in plain_tuples(
            in_range.filter(series_id__in=points).order_by()
            .values_list("series_id", IsoUtc("timestamp"), "value", "target",
                         "run__head_sha", "run_id", "string_values")):
        points[row[0]].append(row)
    for rows in points.values():
        rows.sort(key=itemgetter(TIME))  # ISO times in UTC: in order as text

    names = _names(series)
    changes = environment_marks.changes_for(
        chosen["repo"], chosen["branch"], start, end, {item.arch for item in series},
        {item.device for item in series})
    figures = _charts(series, points, names, changes)
    return Page(
        title="Explorer",
        filters={**state.values, "start": start.isoformat(), "end": end.isoformat(),
                 "series": total, "shown": len(series)},
        tables=[_summary(series, points, names, chosen["threshold"] / 100, benchmark)],
        figures=figures,
        context={"form": form, "total": total, "shown": len(series),
                 "ranked": min(total, RANKED),
                 "empty": not any(points[item.pk] for item in series)},
    )


def _names(series: list) -> dict[int, str]:
    """Each line's name: the model where models differ, and every other dimension that
    tells the shown series apart (a layer, vLLM's tensor-parallel size...); no two alike."""
    _, identities = identity_columns([item.pk for item in series])
    several = len({item.model for item in series}) > 1
    names = {}
    for item in series:
        parts = [item.model] if several else []
        parts += [value or "-" for value in identities.get(item.pk, [])]
        names[item.pk] = " / ".join(parts or [item.model])
    return names


def _most_changed(candidates: list, in_range) -> list:
    """The MAX_LINES candidates whose value changed most over the range (latest over first),
    in the candidates' order; those without two values after those with. The first and
    latest value of each, and whether it has a second, come from the (series, timestamp)
    index, a row each (reading every point of 500 series over a year took ~300 ms), in the
    index's order alone (points at the same time in the order the index keeps them): four
    subqueries, each sorting its rows by (timestamp, id), took 26 ms at 10M results."""
    numeric = in_range.filter(series_id=OuterRef("pk"), value__isnull=False)
    oldest = numeric.order_by("timestamp")
    ends = {pk: (first, last, second is not None) for pk, first, last, second in (
        Series.objects.filter(pk__in=[item.pk for item in candidates]).order_by()
        .annotate(first=Subquery(oldest.values("value")[:1]),
                  last=Subquery(numeric.order_by("-timestamp").values("value")[:1]),
                  second=Subquery(oldest.values("pk")[1:2]))
        .values_list("pk", "first", "last", "second"))}

    def change(item: Series) -> float:
        first, last, two = ends.get(item.pk, (None, None, False))
        return abs(last / first - 1) if two and first else -1.0

    shown = sorted(candidates, key=change, reverse=True)[:MAX_LINES]
    order = {item.pk: position for position, item in enumerate(candidates)}
    return sorted(shown, key=lambda item: order[item.pk])


def _charts(series, points, names, changes) -> list[dict]:
    """A chart per metric, with the environment changes on its series' devices."""
    by_metric: dict[str, list] = {}
    archs: dict[str, set[str]] = {}
    labels: dict[tuple, str] = {}  # a point's label, once a commit (and string result)
    for item in series:
        rows = points[item.pk]
        archs.setdefault(item.metric, set()).add(item.arch)
        by_metric.setdefault(item.metric, []).append({
            "name": names[item.pk],
            "x": [row[TIME] for row in rows],
            "y": [row[VALUE] for row in rows],
            "text": [labels.get(key) or labels.setdefault(key, _label(*key))
                     for key in ((row[SHA], row[STRINGS]) for row in rows)],
        })
    return [environment_marks.mark(charts.lines(metric, lines, metric), changes,
                                   archs[metric])
            for metric, lines in by_metric.items() if any(line["x"] for line in lines)]


def _label(sha: str, strings: str | None) -> str:
    """The commit, and the first string result where the point has some."""
    first = _first_string(strings)
    return short_sha(sha) + (f" {first}" if first is not None else "")


def _first_string(strings: str | None) -> str | None:
    """The first of a point's string results (JSON text as read), None where it has none."""
    values = orjson.loads(strings) if strings else None
    return values[0] if values else None


def _summary(series, points, names, threshold, benchmark) -> Table:
    table = Table("series", ["series", "metric", "latest", "previous", "change %", "target",
                             "% of target", "points", "latest commit"], [])
    directions = metric_directions(benchmark, {item.metric for item in series})
    for item in series:
        rows = points[item.pk]
        latest = rows[-1] if rows else None
        previous = rows[-2] if len(rows) > 1 else None
        value = latest[VALUE] if latest else None
        before = previous[VALUE] if previous else None
        change = (value / before - 1) if value is not None and before else None
        target = latest[TARGET] if latest else None
        shown = value if value is not None or not latest else _first_string(latest[STRINGS])
        table.rows.append([
            names[item.pk], item.metric, shown, before,
            None if change is None else round(100 * change, 2), target,
            round(100 * value / target, 1) if value is not None and target else None,
            len(rows), short_sha(latest[SHA]) if latest else None,
        ])
        better = directions[item.metric].better
        table.classes.append({"change %": change_class(change, threshold, better)})
        table.links.append({"latest commit": reverse("dashboards:run", args=[latest[RUN]])}
                           if latest else {})
    return table

