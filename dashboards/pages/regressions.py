"""Regressions pages: the list of alert groups (filters in the URL, each group expandable to
its members, bulk triage, every matching regression as CSV, silent devices), a group's page
and a regression's page (its series' chart with the change marked, its group and siblings,
history and triage), with the triage forms' POSTs.

The list pages over rows that are alert groups, newest first (by the group's first bad
commit time); a regression without a group (recorded before groups existed) is a row of its
own. Filters select the groups with at least one matching member; a row then sums up all of
its group's members. Magnitudes are read "in the better sense" (`benchsite.regressions.
groups`): the worst is the most negative.

Below the list, the triage precision of the alerts raised in the last `?days=` days (default
the detection settings'; `benchsite.regressions.precision`), also in the JSON as
`precision`."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, time, timedelta

from django import forms
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import BigIntegerField, Case, Count, F, Prefetch, Q, When
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from benchsite import dates
from benchsite.comparison.history import recent
from benchsite.regressions.charts import points, series_chart_payload
from benchsite.regressions.detect import hud_policy
from benchsite.regressions.forms import FilterForm, TriageForm
from benchsite.regressions.groups import (
    Summary,
    change_text,
    github_compare_url,
    summarize,
    triage_members,
)
from benchsite.regressions.models import (
    AlertGroup,
    DetectionSettings,
    Detector,
    Regression,
    SilenceAlert,
)
from benchsite.regressions.precision import parse_days, triage_precision
from benchsite.results.models import Result
from dashboards import repro
from dashboards.pages.common import compare_url, page_url
from dashboards.render import Page, Table
from dashboards.state import BadParameter, State

TRIAGE_PERMISSION = "regressions.change_regression"
PAGE_SIZE = 25  # groups (and ungrouped regressions) per page
# A listed group's members shown (`Summary.listed`: the alerting kinds first, worst first);
# the group's page shows all (a page of groups of 200-300 members each
# rendered 1,148 rows: 309 ms p95 at 3M results).
MEMBERS_LISTED = 20
CHART_POINTS = 400  # the latest points of the series charted
SIBLINGS = 50  # other members of its group listed on a regression's page
TREND_BEFORE, TREND_AFTER = timedelta(days=30), timedelta(days=14)
NUMERIC = (Detector.CHANGEPOINT, Detector.HUD_POLICY)
ACCURACY = "accuracy"  # a metric the trends page shows as a passrate, not a geomean
# "change": the magnitude as shown ("+12.3 %", "pass → fail", "present → absent");
# "environment": the change of the runs' environment it coincides with ("environment: ...")
COLUMNS = ["id", "url", "state", "kind", "detector", "repo", "benchmark", "model", "backend",
           "mode", "dtype", "device", "arch", "metric", "direction", "magnitude", "change",
           "environment", "baseline", "value", "confidence", "last_good_sha", "first_bad_sha",
           "first_bad_at", "created_at", "branch", "group"]
# "detected_at": the earliest detection of a member (the home page's "detected")
GROUP_COLUMNS = ["group", "url", "repo", "branch", "state", "last_good_sha", "first_bad_sha",
                 "first_bad_at", "detected_at", "members", "regressions", "improvements",
                 "others", "benchmarks", "devices", "recipes or backends", "median change",
                 "worst change", "compare", "github"]


def _storable_day(day) -> None:
    if reason := dates.problem(_midnight(day)):
        raise forms.ValidationError(reason)


class GroupFilterForm(FilterForm):
    """The list's filters: those of the regressions (a group is listed when a member
    matches), and dates of the group's first bad commit (`start`..`end`, inclusive)."""

    start = forms.DateField(required=False, label="From", validators=[_storable_day],
                            widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, label="To", validators=[_storable_day],
                          widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self):
        data = super().clean()
        if data.get("start") and data.get("end") and data["start"] > data["end"]:
            raise forms.ValidationError("From must be on or before To")
        return data

    def regressions(self):
        """The matching regressions, with `listed_at`: their group's first bad time (their
        own without a group), within the dates."""
        found = super().regressions().annotate(
            listed_at=Coalesce("group__first_bad_at", "first_bad_at"))
        if self.is_valid():
            if self.cleaned_data["start"]:
                found = found.filter(listed_at__gte=_midnight(self.cleaned_data["start"]))
            if self.cleaned_data["end"]:
                found = found.filter(listed_at__lt=_midnight(self.cleaned_data["end"])
                                     + timedelta(days=1))
        return found


def _midnight(day) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


class BulkTriageForm(TriageForm):
    groups = forms.ModelMultipleChoiceField(AlertGroup.objects.all(), required=False)
    regressions = forms.ModelMultipleChoiceField(Regression.objects.all(), required=False)

    def clean(self):
        data = super().clean()
        if not data.get("groups") and not data.get("regressions"):
            raise forms.ValidationError("select at least one group")
        return data


def _members_query():
    return (Regression.objects.select_related("series", "environment_change")
            .order_by("-first_bad_at", "id"))


def build_list(state: State) -> Page:
    form = GroupFilterForm(state.query)
    found = form.regressions()
    rows = (found.order_by()
            .annotate(single=Case(When(group__isnull=True, then=F("pk")), default=None,
                                  output_field=BigIntegerField()))
            .values("group", "single", "listed_at").annotate(matching=Count("pk"))
            .order_by(F("listed_at").desc(), F("group").desc(nulls_last=True),
                      F("single").desc(nulls_last=True)))
    listed = Paginator(rows, PAGE_SIZE).get_page(state.query.get("page"))
    every = state.csv and state.query.get("table") == "groups"
    entries = _entries(list(rows) if every else list(listed))
    table = Table("regressions", COLUMNS, [])
    if state.csv:
        if not every:
            table.rows = [_row(state, regression)
                          for regression in found.select_related("environment_change")]
    else:
        table.rows = [_row(state, member["regression"]) for entry in entries
                      for member in entry["members"]]
    groups = Table("groups", GROUP_COLUMNS, [_group_row(state, entry) for entry in entries])
    query = state.query.copy()
    query.pop("page", None)
    settings = DetectionSettings.load()
    precision = triage_precision(settings, _precision_days(state, settings))
    filters = {**(form.cleaned_data if form.is_valid() else {}), "page": listed.number,
               "days": precision.days}
    return Page(
        title="Regressions", filters=filters, tables=[table, groups],
        data={"precision": precision.as_json()},
        context={"form": form, "listed": listed, "entries": entries,
                 "precision": precision, "precision_query": [
                     (key, value) for key, values in query.lists() if key != "days"
                     for value in values],
                 "query": query.urlencode(), "triage_form": TriageForm(),
                 "can_triage": state.request.user.has_perm(TRIAGE_PERMISSION),
                 "silences": SilenceAlert.objects.filter(resolved_at__isnull=True)
                 .select_related("series").order_by("-last_seen")},
    )


def _precision_days(state: State, settings: DetectionSettings) -> int:
    """The precision's window, `?days=`: a wrong one is refused (400), never replaced."""
    raw = state.query.get("days", "").strip()
    if not raw:
        return settings.precision_days
    try:
        return parse_days(raw)
    except ValueError as error:
        raise BadParameter("days", str(error)) from None


def _entries(rows: list[dict]) -> list[dict]:
    """A listed row per group (its members loaded) or ungrouped regression, in `rows`' order:
    three queries whatever the number of rows."""
    group_ids = [row["group"] for row in rows if row["group"] is not None]
    single_ids = [row["single"] for row in rows if row["group"] is None]
    groups = AlertGroup.objects.prefetch_related(Prefetch("members", _members_query()))
    groups = groups.in_bulk(group_ids) if group_ids else {}
    singles = _members_query().in_bulk(single_ids) if single_ids else {}
    entries = []
    for row in rows:
        group = groups.get(row["group"])
        single = singles.get(row["single"])
        if group is None and single is None:
            continue  # deleted meanwhile
        entries.append(_entry(group, single, row["matching"], listed=MEMBERS_LISTED))
    return entries


def _entry(group: AlertGroup | None, single: Regression | None, matching: int,
           listed: int | None = None) -> dict:
    """A group's (or ungrouped regression's) summary, links and members: `listed` of them
    (`Summary.listed`; all in the summary's order where None), the summary over all."""
    if group is not None:
        summary = summarize(group.members.all())
        where = group
    else:
        summary = summarize([single])
        where = single
    repo = group.repo if group is not None else single.series.repo
    return {"group": group, "regression": single, "summary": summary, "matching": matching,
            "repo": repo, "branch": where.branch, "last_good_sha": where.last_good_sha,
            "first_bad_sha": where.first_bad_sha, "first_bad_at": where.first_bad_at,
            "detected_at": detected_at(where, summary.members),
            "environments": sorted({m.environment_text for m in summary.members} - {""}),
            "url": where.get_absolute_url(),
            "members": [_member(member) for member in (
                summary.members if listed is None else summary.listed(listed))],
            "links": _links(repo, where.branch, where.last_good_sha, where.first_bad_sha,
                            where.last_good_at, where.first_bad_at, summary)}


def detected_at(where: AlertGroup | Regression, members: list[Regression]):
    """When a group (or ungrouped regression) was first detected, as the home page says it:
    the earliest detection of a member, else when it was recorded."""
    return min((m.detected_at for m in members if m.detected_at), default=where.created_at)


def _member(regression: Regression) -> dict:
    return {"regression": regression, "series": regression.series,
            "change": change_text(regression)}


def _links(repo: str, branch: str, last_good_sha: str, first_bad_sha: str, last_good_at,
           first_bad_at, summary: Summary) -> dict:
    """The compare page and GitHub range of a commit range, and per benchmark its trends
    around the change (on the device and metric when all its members share one)."""
    start = (last_good_at or first_bad_at) - TREND_BEFORE
    end = first_bad_at + TREND_AFTER
    trends = []
    for benchmark in summary.benchmarks:
        series = [m.series for m in summary.members if m.series.benchmark == benchmark]
        archs = {s.arch for s in series}
        metrics = {s.metric for s in series}
        metric = metrics.pop() if len(metrics) == 1 else ""
        trends.append({"benchmark": benchmark, "url": page_url(
            "dashboards:trends", repo=repo, benchmark=benchmark, branch=branch,
            arch=archs.pop() if len(archs) == 1 else "",
            metric=metric if metric != ACCURACY else "",  # the trends chart passrates apart
            start=start.date().isoformat(), end=end.date().isoformat())})
    return {"compare": compare_url(repo, last_good_sha, first_bad_sha),
            "github": github_compare_url(repo, last_good_sha, first_bad_sha),
            "trends": trends}


def _row(state: State, regression: Regression) -> list:
    series = regression.series
    return [regression.pk, state.request.build_absolute_uri(regression.get_absolute_url()),
            regression.state, regression.kind, regression.detector, series.repo,
            series.benchmark, series.model, series.backend, series.mode, series.dtype,
            series.device, series.arch, series.metric, regression.direction,
            regression.magnitude, change_text(regression), regression.environment_text or None,
            regression.baseline, regression.value, regression.confidence,
            regression.last_good_sha, regression.first_bad_sha,
            regression.first_bad_at.isoformat(), regression.created_at.isoformat(),
            regression.branch, regression.group_id]


def _group_row(state: State, entry: dict) -> list:
    summary, links = entry["summary"], entry["links"]
    absolute = state.request.build_absolute_uri
    return [entry["group"].pk if entry["group"] else None, absolute(entry["url"]),
            entry["repo"], entry["branch"], summary.state, entry["last_good_sha"],
            entry["first_bad_sha"], entry["first_bad_at"].isoformat(),
            entry["detected_at"].isoformat(), len(summary.members),
            summary.regressions, summary.improvements, summary.others,
            ", ".join(summary.benchmarks), ", ".join(summary.devices),
            ", ".join(summary.variants), summary.median, summary.worst,
            absolute(links["compare"]) if links["compare"] else None, links["github"] or None]


def build_group(state: State, pk: int) -> Page:
    loaded = _members_query().select_related("environment_change")
    group = get_object_or_404(
        AlertGroup.objects.prefetch_related(Prefetch("members", loaded)), pk=pk)
    entry = _entry(group, None, 0)
    summary = entry["summary"]
    environment = _shared_environment(summary.members)
    members = Table("members", COLUMNS, [_row(state, m) for m in summary.members])
    uniform = next(iter(summary.states)) if len(summary.states) == 1 else None
    reproduce = repro.for_regressions(summary.members, state.request.build_absolute_uri)
    return Page(
        title=f"Alert group {group.pk}", filters={"group": group.pk},
        tables=[members, Table("group", GROUP_COLUMNS, [_group_row(state, entry)]),
                repro.table(reproduce)],
        context={"group": group, "entry": entry, "summary": summary, "repros": reproduce,
                 "environment": environment,
                 "form": TriageForm(initial={"state": uniform}),
                 "can_triage": state.request.user.has_perm(TRIAGE_PERMISSION)},
        data={"environment_change": environment, "summary": summary.as_json()},
    )


def _shared_environment(members: list[Regression]) -> dict | None:
    """The environment change most of a group's members coincide with (by its summary:
    each device and job records its own), when more than half do: its summary, how many
    members and the first runs in it; else None."""
    changes = [m.environment_change for m in members if m.environment_change is not None]
    counted = Counter(change.summary for change in changes).most_common(1)
    if not counted or 2 * counted[0][1] <= len(members):
        return None
    summary, count = counted[0]
    return {"summary": summary, "text": f"environment: {summary}", "members": count,
            "of": len(members), "after_runs": sorted(
                {change.after_run_id for change in changes if change.summary == summary})}


def build_detail(state: State, pk: int) -> Page:
    regression = get_object_or_404(
        Regression.objects.select_related("series", "group", "environment_change"), pk=pk)
    series = regression.series
    # The history the regression was found in, as detection read it: its branch's runs
    # only (a bisect's `bisect/N`, a try job's or a pull request's runs of the same series
    # are never points of it), and the changes found in that history.
    latest = Result.objects.stored().filter(series=series, run__head_branch=regression.branch) \
        .order_by("-timestamp", "-id")
    results = points(latest[:CHART_POINTS])
    results.reverse()
    chart = series_chart_payload(series, results,
                                 series.regressions.filter(branch=regression.branch))
    events = list(regression.events.select_related("user"))
    history = Table("history", ["when", "who", "from", "to", "note"], [
        [event.created_at.isoformat(), str(event.user or "detector"), event.from_state or None,
         event.to_state, event.note or None] for event in events])
    siblings, more = [], 0
    group = regression.group
    if group is not None:
        others = (_members_query().select_related("environment_change")
                  .filter(group=group).exclude(pk=regression.pk))
        siblings = [_member(m) for m in others[:SIBLINGS]]
        more = others.count() - len(siblings) if len(siblings) == SIBLINGS else 0
    links = _links(series.repo, regression.branch, regression.last_good_sha,
                   regression.first_bad_sha, regression.last_good_at, regression.first_bad_at,
                   summarize([regression]))
    trends = {"repo": series.repo, "benchmark": series.benchmark, "branch": regression.branch,
              "arch": series.arch, "mode": series.mode, "dtype": series.dtype,
              "backend": series.backend,
              "metric": series.metric if series.metric != ACCURACY else "",
              "start": ((regression.last_good_at or regression.first_bad_at)
                        - TREND_BEFORE).date().isoformat(),
              "end": (regression.first_bad_at + TREND_AFTER).date().isoformat()}
    links["trends"] = [{"benchmark": series.benchmark,
                        "url": page_url("dashboards:trends", **trends)}]
    links["explorer"] = page_url("dashboards:explorer", repo=series.repo,
                                 benchmark=series.benchmark, model=series.model,
                                 metric=series.metric, arch=series.arch,
                                 branch=regression.branch, start=trends["start"],
                                 end=trends["end"])
    # Runs the change may be at (more than one where noise leaves its place open).
    in_range = (Result.objects.filter(series=series, run__head_branch=regression.branch,
                                      timestamp__gt=regression.last_good_at,
                                      timestamp__lte=regression.first_bad_at).count()
                if regression.last_good_at else 0)
    siblings_table = Table("siblings", ["id", "url", "kind", "benchmark", "model", "metric",
                                        "device", "magnitude", "state", "change"], [
        [s["regression"].pk, state.request.build_absolute_uri(
            s["regression"].get_absolute_url()), s["regression"].kind, s["series"].benchmark,
         s["series"].model, s["series"].metric, s["series"].arch or s["series"].device,
         s["regression"].magnitude, s["regression"].state, s["change"]] for s in siblings])
    reproduce = repro.for_regressions([regression], state.request.build_absolute_uri)
    return Page(
        title=f"Regression {regression.pk}",
        filters={"regression": regression.pk, "group": regression.group_id},
        tables=[history, siblings_table, repro.table(reproduce)], figures=[chart],
        context={"regression": regression, "series": series, "events": events,
                 "hud_status": _hud_status(regression), "evidence": _evidence(regression),
                 "change": change_text(regression), "group": group, "siblings": siblings,
                 "more_siblings": more, "links": links, "in_range": in_range,
                 "repros": reproduce, "environment_change": regression.environment_change,
                 "form": TriageForm(initial={"state": regression.state}),
                 "can_triage": state.request.user.has_perm(TRIAGE_PERMISSION)},
        data={"environment_change": regression.environment_change.as_json()
              if regression.environment_change else None},
    )


def _evidence(regression: Regression) -> list[str]:
    """What other detectors said of the same change, one line each: "HUD policy:
    regression (-12.0 %, 4 violations in a row)"."""
    lines = []
    for name, said in sorted((regression.evidence or {}).items()):
        label = Detector(name).label if name in Detector.values else name
        if not isinstance(said, dict):
            lines.append(f"{label}: {said}")
            continue
        details = []
        if isinstance(said.get("magnitude"), int | float):
            details.append(f"{said['magnitude'] * 100:+.1f} %")
        if isinstance(said.get("violations"), int):
            details.append(f"{said['violations']} violations in a row")
        if said.get("first_bad_at"):
            details.append(f"from {str(said['first_bad_at'])[:16].replace('T', ' ')}")
        verdict = str(said.get("status") or said.get("kind") or "no verdict")
        lines.append(f"{label}: {verdict}" + (f" ({', '.join(details)})" if details else ""))
    return lines


def _hud_status(regression: Regression) -> str | None:
    """The HUD policy's verdict on the series' latest points (None: direction unknown, or
    not a numeric change)."""
    if not regression.direction or regression.detector not in NUMERIC:
        return None
    settings = DetectionSettings.load()
    history = recent([regression.series_id], settings.history_points,
                     [regression.branch]).get(regression.series_id)
    if history is None:
        return hud_policy.INSUFFICIENT
    params = settings.hud_params(regression.series.metric, regression.series.benchmark)
    return hud_policy.status(history.values, regression.direction, params)


def _may_triage(request: HttpRequest, back: str) -> HttpResponse | None:
    """A redirect to the site's login for anonymous users; PermissionDenied without the
    permission; None when the user may triage."""
    if not request.user.is_authenticated:
        return redirect_to_login(back)
    if not request.user.has_perm(TRIAGE_PERMISSION):
        raise PermissionDenied("triage needs the permission to change regressions")
    return None


def _form_errors(request: HttpRequest, form: forms.Form) -> None:
    messages.error(request, "; ".join(
        f"{field}: {' '.join(errors)}" if field != "__all__" else " ".join(errors)
        for field, errors in form.errors.items()))


def triage(request: HttpRequest, pk: int) -> HttpResponse:
    """The triage form's POST: a new state and a note, then back to the regression's page."""
    regression = get_object_or_404(Regression, pk=pk)
    refused = _may_triage(request, regression.get_absolute_url())
    if refused:
        return refused
    form = TriageForm(request.POST)
    if not form.is_valid():
        _form_errors(request, form)
    elif regression.triage(form.cleaned_data["state"], request.user,
                           form.cleaned_data["note"]):
        messages.success(request, f"Marked {regression.get_state_display()}.")
    else:
        messages.warning(request, "Nothing recorded: the same state and no note, or someone "
                                  "changed it meanwhile.")
    return redirect(regression)


def group_triage(request: HttpRequest, pk: int) -> HttpResponse:
    """A group's triage form: the state and note applied to every member (each gets its
    event), then back to the group's page."""
    group = get_object_or_404(AlertGroup, pk=pk)
    refused = _may_triage(request, group.get_absolute_url())
    if refused:
        return refused
    form = TriageForm(request.POST)
    if not form.is_valid():
        _form_errors(request, form)
    else:
        members = list(group.members.all())
        _triaged(request, form, members, triage_members(
            members, form.cleaned_data["state"], request.user, form.cleaned_data["note"]))
    return redirect(group)


def bulk_triage(request: HttpRequest) -> HttpResponse:
    """The list's form: the state and note applied to every member of the selected groups
    (and to selected ungrouped regressions), then back to the list."""
    back = request.POST.get("next", "")
    if not back.startswith("/") or not url_has_allowed_host_and_scheme(
            back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        back = reverse("regressions:list")
    refused = _may_triage(request, back)
    if refused:
        return refused
    form = BulkTriageForm(request.POST)
    if not form.is_valid():
        _form_errors(request, form)
        return redirect(back)
    data = form.cleaned_data
    members = list(Regression.objects.filter(
        Q(group__in=data["groups"]) | Q(pk__in=data["regressions"])).order_by("pk"))
    changed = triage_members(members, data["state"], request.user, data["note"])
    _triaged(request, form, members, changed, groups=len(data["groups"]))
    return redirect(back)


def _triaged(request: HttpRequest, form: forms.Form, members: list, changed: int,
             groups: int | None = None) -> None:
    label = dict(Regression.State.choices)[form.cleaned_data["state"]].lower()
    where = f" in {groups} group{'s' if groups != 1 else ''}" if groups else ""
    text = f"Marked {changed} of {len(members)} regression{'s' if len(members) != 1 else ''}"
    if changed:
        messages.success(request, f"{text}{where} {label}.")
    else:
        messages.warning(request, f"{text}{where} {label}: nothing recorded (the same state "
                                  "and no note, or someone changed them meanwhile).")
