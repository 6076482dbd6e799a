"""Regressions pages: the list (filters in the URL, every match as CSV, silent devices) and a
regression's page (its series' chart with the change marked, history and triage), with the
triage form's POST."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse

from benchsite.regressions.charts import series_chart_payload
from benchsite.regressions.detect import hud_policy
from benchsite.regressions.forms import FilterForm, TriageForm
from benchsite.regressions.history import recent
from benchsite.regressions.models import DetectionSettings, Regression, SilenceAlert
from benchsite.results.models import Result
from dashboards.render import Page, Table
from dashboards.state import State

TRIAGE_PERMISSION = "regressions.change_regression"
PAGE_SIZE = 100
CHART_POINTS = 400  # the latest points of the series charted
COLUMNS = ["id", "url", "state", "kind", "detector", "repo", "benchmark", "model", "backend",
           "mode", "dtype", "device", "arch", "metric", "direction", "magnitude", "baseline",
           "value", "confidence", "last_good_sha", "first_bad_sha", "first_bad_at",
           "created_at"]


def build_list(state: State) -> Page:
    form = FilterForm(state.query)
    regressions = form.regressions()
    listed = Paginator(regressions, PAGE_SIZE).get_page(state.query.get("page"))
    table = Table("regressions", COLUMNS, [])
    for regression in regressions if state.csv else listed:
        table.rows.append(_row(state, regression))
    query = state.query.copy()
    query.pop("page", None)
    return Page(
        title="Regressions",
        filters={**(form.cleaned_data if form.is_valid() else {}), "page": listed.number},
        tables=[table],
        context={"form": form, "listed": listed, "query": query.urlencode(),
                 "silences": SilenceAlert.objects.filter(resolved_at__isnull=True)
                 .select_related("series").order_by("-last_seen")},
    )


def _row(state: State, regression: Regression) -> list:
    series = regression.series
    return [regression.pk, state.request.build_absolute_uri(regression.get_absolute_url()),
            regression.state, regression.kind, regression.detector, series.repo,
            series.benchmark, series.model, series.backend, series.mode, series.dtype,
            series.device, series.arch, series.metric, regression.direction,
            regression.magnitude, regression.baseline, regression.value, regression.confidence,
            regression.last_good_sha, regression.first_bad_sha,
            regression.first_bad_at.isoformat(), regression.created_at.isoformat()]


def build_detail(state: State, pk: int) -> Page:
    regression = get_object_or_404(Regression.objects.select_related("series"), pk=pk)
    series = regression.series
    latest = Result.objects.filter(series=series).order_by("-timestamp", "-id")
    results = list(latest.select_related("run").only(
        "timestamp", "value", "values", "run__head_sha", "run__head_branch")[:CHART_POINTS])
    results.reverse()
    chart = series_chart_payload(series, results, series.regressions.all())
    events = list(regression.events.select_related("user"))
    history = Table("history", ["when", "who", "from", "to", "note"], [
        [event.created_at.isoformat(), str(event.user or "detector"), event.from_state or None,
         event.to_state, event.note or None] for event in events])
    return Page(
        title=f"Regression {regression.pk}", filters={"regression": regression.pk},
        tables=[history], figures=[chart],
        context={"regression": regression, "series": series, "events": events,
                 "hud_status": _hud_status(regression),
                 "form": TriageForm(initial={"state": regression.state}),
                 "can_triage": state.request.user.has_perm(TRIAGE_PERMISSION)},
    )


def _hud_status(regression: Regression) -> str | None:
    """The HUD policy's verdict on the series' latest points (None: direction unknown)."""
    if not regression.direction:
        return None
    settings = DetectionSettings.load()
    history = recent([regression.series_id], settings.history_points,
                     [regression.branch]).get(regression.series_id)
    if history is None:
        return hud_policy.INSUFFICIENT
    params = settings.hud_params(regression.series.metric, regression.series.benchmark)
    return hud_policy.status(history.values, regression.direction, params)


def triage(request: HttpRequest, pk: int) -> HttpResponse:
    """The triage form's POST: a new state and a note, then back to the regression's page."""
    regression = get_object_or_404(Regression, pk=pk)
    if not request.user.is_authenticated:
        return redirect_to_login(regression.get_absolute_url(), reverse("admin:login"))
    if not request.user.has_perm(TRIAGE_PERMISSION):
        raise PermissionDenied("triage needs the permission to change regressions")
    form = TriageForm(request.POST)
    if not form.is_valid():
        messages.error(request, "; ".join(f"{field}: {' '.join(errors)}"
                                          for field, errors in form.errors.items()))
    elif regression.triage(form.cleaned_data["state"], request.user,
                           form.cleaned_data["note"]):
        messages.success(request, f"Marked {regression.get_state_display()}.")
    else:
        messages.warning(request, "Nothing recorded: the same state and no note, or someone "
                                  "changed it meanwhile.")
    return redirect(regression)
