"""The regressions page (filters in the URL, CSV download) and a regression's page (its
series' chart with the change marked, history and triage)."""

from __future__ import annotations

import csv

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from benchsite.regressions.charts import series_chart_payload
from benchsite.regressions.detect import hud_policy
from benchsite.regressions.forms import FilterForm, TriageForm
from benchsite.regressions.history import recent
from benchsite.regressions.models import DetectionSettings, Regression, SilenceAlert
from benchsite.results.models import Result

TRIAGE_PERMISSION = "regressions.change_regression"
CHART_POINTS = 400  # the latest points of the series charted
CSV_COLUMNS = ("id", "url", "state", "kind", "detector", "repo", "benchmark", "model",
               "backend", "mode", "dtype", "device", "arch", "metric", "direction", "magnitude",
               "baseline", "value", "confidence", "last_good_sha", "first_bad_sha",
               "first_bad_at", "created_at")


def regression_list(request: HttpRequest) -> HttpResponse:
    form = FilterForm(request.GET)
    regressions = form.regressions()
    if request.GET.get("format") == "csv":
        return _csv(request, regressions)
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "regressions/list.html", {
        "form": form,
        "page": Paginator(regressions, 100).get_page(request.GET.get("page")),
        "query": query.urlencode(),
        "silences": SilenceAlert.objects.filter(resolved_at__isnull=True)
        .select_related("series").order_by("-last_seen"),
    })


def regression_detail(request: HttpRequest, pk: int) -> HttpResponse:
    regression = get_object_or_404(Regression.objects.select_related("series"), pk=pk)
    series = regression.series
    latest = Result.objects.filter(series=series).order_by("-timestamp", "-id")
    results = list(latest.select_related("run").only(
        "timestamp", "value", "values", "run__head_sha", "run__head_branch")[:CHART_POINTS])
    results.reverse()
    chart = series_chart_payload(series, results, series.regressions.all())
    return render(request, "regressions/detail.html", {
        "regression": regression, "series": series, "chart": chart,
        "events": regression.events.select_related("user"),
        "hud_status": _hud_status(regression),
        "form": TriageForm(initial={"state": regression.state}),
        "can_triage": request.user.has_perm(TRIAGE_PERMISSION),
    })


@require_POST
def regression_triage(request: HttpRequest, pk: int) -> HttpResponse:
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


def _hud_status(regression: Regression) -> str | None:
    """The HUD policy's verdict on the series' latest points (None: direction unknown)."""
    if not regression.direction:
        return None
    settings = DetectionSettings.load()
    history = recent([regression.series_id], settings.history_points).get(regression.series_id)
    if history is None:
        return hud_policy.INSUFFICIENT
    params = settings.hud_params(regression.series.metric, regression.series.benchmark)
    return hud_policy.status(history.values, regression.direction, params)


def _csv(request: HttpRequest, regressions) -> HttpResponse:
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="regressions.csv"'
    writer = csv.writer(response)
    writer.writerow(CSV_COLUMNS)
    for regression in regressions:
        series = regression.series
        writer.writerow([_cell(value) for value in (
            regression.pk, request.build_absolute_uri(regression.get_absolute_url()),
            regression.state, regression.kind, regression.detector, series.repo,
            series.benchmark, series.model, series.backend, series.mode, series.dtype,
            series.device, series.arch, series.metric, regression.direction,
            regression.magnitude, regression.baseline, regression.value, regression.confidence,
            regression.last_good_sha, regression.first_bad_sha,
            regression.first_bad_at.isoformat(), regression.created_at.isoformat())])
    return response


def _cell(value):
    """Text a spreadsheet would run as a formula is quoted (names come from uploads)."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return "" if value is None else value
