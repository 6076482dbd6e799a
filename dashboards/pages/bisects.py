"""`/bisects/`: every bisect and A/B try job, newest first, with the API's filters
(`/api/v3/bisects`: state, kind, repo, source, queue, regression) in the URL, a page at a
time; `/bisects/N/`: a bisect or A/B try job: its outcome, the followed metric over every
commit it measured (each repetition a point, the culprit marked) and its steps; and the
"Bisect" buttons of the regression and alert-group pages (POST, then here)."""

from __future__ import annotations

from statistics import median

from django.contrib import messages
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse

from benchsite.bisects.lab import label
from benchsite.bisects.models import Bisect, Source, describe
from benchsite.bisects.start import BisectRefused, start_group, start_regression
from benchsite.regressions.models import AlertGroup, Regression
from dashboards.pages.common import page_url
from dashboards.paging import paged
from dashboards.render import Page, Table
from dashboards.state import State

START_PERMISSION = "bisects.add_bisect"
CULPRIT_COLOR, POINT_COLOR = "#d62728", "#1f77b4"
LIST_COLUMNS = ["bisect", "kind", "state", "repo", "source", "spec", "metric", "good", "bad",
                "culprit", "regression", "queue", "created", "finished", "progress"]


def build_list(state: State) -> Page:
    """Bisects and try jobs, newest first, filtered as the API's list is (each filter a
    dropdown of the values there are; a value not offered is reset with a note, or answers
    400 to a JSON or CSV reader)."""
    sources = list(Source.objects.order_by("name").values_list("name", "repo"))
    repos = sorted({repo for _, repo in sources})
    queues = list(Bisect.objects.order_by("queue").values_list("queue", flat=True).distinct())
    chosen = {
        "state": state.choice("state", ["", *Bisect.State.values]),
        "kind": state.choice("kind", ["", *Bisect.Kind.values]),
        "repo": state.choice("repo", ["", *repos]),
        "source": state.choice("source", ["", *(name for name, _ in sources)]),
        "queue": state.choice("queue", ["", *queues]),
        "regression": _regression_id(state),
    }
    bisects = Bisect.objects.select_related("source", "head_source")
    if chosen["repo"]:
        bisects = bisects.filter(Q(source__repo=chosen["repo"])
                                 | Q(head_source__repo=chosen["repo"]))
    fields = {"state": "state", "kind": "kind", "source": "source__name", "queue": "queue",
              "regression": "regression_id"}
    bisects = bisects.filter(**{fields[name]: chosen[name] for name in fields
                                if chosen[name]})
    shown, paging = paged(state, bisects)
    table = Table("bisects", LIST_COLUMNS, [], paging=paging)
    for bisect in shown:
        table.rows.append([
            bisect.pk, bisect.kind, bisect.state, bisect.source.repo, bisect.source.name,
            bisect.spec_name, bisect.metric or None, bisect.good_sha or bisect.good_ref,
            bisect.bad_sha or bisect.bad_ref, bisect.culprit_sha or None,
            bisect.regression_id, bisect.queue, bisect.created_at.isoformat(),
            bisect.finished_at.isoformat() if bisect.finished_at else None,
            bisect.progress or None])
        links = {"bisect": bisect.get_absolute_url()}
        if bisect.regression_id:
            links["regression"] = reverse("regressions:detail", args=[bisect.regression_id])
        table.links.append(links)
    return Page(title="Bisects and try jobs", filters={**chosen, **paging.as_filters()},
                tables=[table],
                context={"states": Bisect.State.values, "kinds": Bisect.Kind.values,
                         "repos": repos, "sources": [name for name, _ in sources],
                         "queues": queues})


def _regression_id(state: State) -> str:
    raw = state.text("regression")
    if raw and not raw.isdigit():
        raw = state.fallback("regression", f"{raw!r} is not a regression id", "",
                             f"regression: {raw!r} is not a regression id; ignored.")
        state.values["regression"] = raw
    return raw


def build_detail(state, pk: int) -> Page:
    bisect = get_object_or_404(Bisect.objects.select_related(
        "source", "head_source", "regression__series"), pk=pk)
    steps = list(bisect.steps.all())
    data = describe(bisect)
    sources = {0: bisect.source, 1: bisect.head_source or bisect.source}
    rows = []
    for step, entry in zip(steps, data["steps"], strict=True):
        values = entry["values"] if isinstance(entry["values"], list) else []
        source = sources[1] if bisect.kind == Bisect.Kind.AB and step.position == 1 \
            else bisect.source
        rows.append([step.position, step.side or None, step.sha,
                     source.commit_url(step.sha) or None, step.subject, step.author,
                     step.verdict or None, len(step.rounds),
                     median(values) if values else None, len(values),
                     step.failure.splitlines()[0] if step.failure else None])
    table = Table("steps", ["position", "side", "sha", "commit_url", "subject", "author",
                            "verdict", "rounds", "median", "repetitions", "failure"], rows)
    figures = [_bisect_figure(bisect, steps)] if bisect.kind == Bisect.Kind.BISECT else \
        [_ab_figure(bisect, steps)]
    compare = ""
    if bisect.kind == Bisect.Kind.AB and bisect.good_sha and bisect.bad_sha:
        compare = page_url("dashboards:compare", bisect.good_sha, bisect.bad_sha,
                           repo=bisect.source.repo)
    return Page(
        title=f"{bisect.get_kind_display().capitalize()} {bisect.pk}",
        filters={"bisect": bisect.pk}, tables=[table], figures=figures,
        context={"bisect": bisect, "data": data, "outcome": bisect.outcome,
                 "steps": list(zip(steps, table.by_column(), strict=True)),
                 "compare": compare,
                 "culprit": bisect.outcome.get("culprit")})


def _x(step) -> str:
    return f"{step.position}: {step.sha[:8]}"


def _bisect_figure(bisect: Bisect, steps: list) -> dict:
    """Every repetition of the followed metric at each measured commit (in range order),
    the medians joined, the culprit marked."""
    tracked = label(bisect.cells[0]["key"], bisect.metric) if bisect.metric else ""
    measured = [step for step in steps if step.rounds]
    points = {"x": [], "y": [], "text": []}
    for step in measured:
        for number, entry in enumerate(step.rounds, 1):
            for value in entry["values"].get(tracked, []):
                points["x"].append(_x(step))
                points["y"].append(value)
                points["text"].append(f"round {number}: {step.subject[:60]}")
    medians = [median(v) if (v := [x for r in step.rounds for x in r["values"].get(
        tracked, [])]) else None for step in measured]
    data = [
        {"type": "scatter", "mode": "markers", "name": "repetitions", **points,
         "marker": {"color": POINT_COLOR, "size": 6, "opacity": 0.6},
         "hovertemplate": "%{x}<br>%{y:.4g}<br>%{text}<extra></extra>"},
        {"type": "scatter", "mode": "lines+markers", "name": "median",
         "x": [_x(step) for step in measured], "y": medians,
         "line": {"color": "#555", "dash": "dot"}, "marker": {"symbol": "line-ew-open",
                                                              "size": 14}},
    ]
    culprit = next((s for s in measured if s.sha == bisect.culprit_sha), None)
    if culprit is not None:
        data.append({"type": "scatter", "mode": "markers", "name": "culprit",
                     "x": [_x(culprit)], "y": [medians[measured.index(culprit)]],
                     "marker": {"color": CULPRIT_COLOR, "size": 16, "symbol": "x"}})
    return {"data": data, "layout": {
        "title": {"text": f"{bisect.metric or 'metric'} over the commits measured"},
        "xaxis": {"title": {"text": "position in the range: commit"}, "type": "category"},
        "yaxis": {"title": {"text": bisect.metric}}, "hovermode": "closest",
        "margin": {"t": 50}}}


def _ab_figure(bisect: Bisect, steps: list) -> dict:
    """Every repetition of each series, base beside head."""
    data = []
    for step in steps:
        x, y = [], []
        for entry in step.rounds:
            for name, values in entry["values"].items():
                x += [name] * len(values)
                y += values
        data.append({"type": "box", "name": f"{step.side} {step.sha[:8]}", "x": x, "y": y,
                     "boxpoints": "all", "jitter": 0.4, "pointpos": 0})
    return {"data": data, "layout": {"title": {"text": "every repetition, base and head"},
                                     "boxmode": "group", "yaxis": {"type": "log"},
                                     "margin": {"t": 50, "b": 160}}}


def _start(request: HttpRequest, back, start) -> HttpResponse:
    if not request.user.has_perm(START_PERMISSION):
        messages.error(request, "You may not start bisects (it needs the permission to add "
                                "them).")
        return redirect(back)
    try:
        bisect = start(user=request.user)
    except BisectRefused as error:
        messages.error(request, f"No bisect started: {error}")
        return redirect(back)
    messages.success(request, f"Bisect {bisect.pk} started.")
    return redirect(bisect)


def start_for_regression(request: HttpRequest, pk: int) -> HttpResponse:
    """The regression page's "Bisect" button."""
    regression = get_object_or_404(Regression.objects.select_related("series"), pk=pk)
    return _start(request, regression,
                  lambda **options: start_regression(regression, **options))


def start_for_group(request: HttpRequest, pk: int) -> HttpResponse:
    """The alert group page's "Bisect" button: its worst member that can be bisected."""
    group = get_object_or_404(AlertGroup, pk=pk)
    return _start(request, group, lambda **options: start_group(group, **options))
