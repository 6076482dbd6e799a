"""Home: the last 24 hours (alert groups opened, nightly reports, devices silent), then the
latest runs, each linked to its run page and its benchmarks' trends."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, Min, Q
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils import timezone

from benchsite import links
from benchsite.regressions.models import AlertGroup, NightlyReport, Regression, SilenceAlert
from benchsite.regressions.report import totals
from benchsite.results.models import Run, RunSummary
from dashboards.filters import short_sha
from dashboards.pages.common import page_url
from dashboards.render import Page, Table
from dashboards.state import State
from runner.contract.names import QUANT_BENCHMARK

LATEST = 40
RECENT = timedelta(hours=24)
SHOWN = 10  # groups and reports listed in the panel


def build(state: State) -> Page:
    runs = list(Run.objects.order_by("-timestamp")[:LATEST])
    benchmarks: dict[int, list[str]] = {}
    for run_id, benchmark in (RunSummary.objects.filter(run__in=runs)
                              .order_by().values_list("run_id", "benchmark").distinct()):
        benchmarks.setdefault(run_id, []).append(benchmark)
    table = Table("latest runs", ["run", "time", "repo", "branch", "commit", "job", "device",
                                  "benchmarks", "results"], [])
    for run in runs:
        names = sorted(benchmarks.get(run.pk, []))
        table.rows.append([run.pk, run.timestamp.strftime("%Y-%m-%d %H:%M"), run.repo,
                           run.head_branch, short_sha(run.head_sha), run.name,
                           run.arch or run.device, ", ".join(names), run.result_count])
        first = names[0] if names else ""
        # the run's own branch and device: a job's run on `adhoc` opens that run
        trend = (page_url("dashboards:quantization", repo=run.repo, branch=run.head_branch,
                          sha=run.head_sha, arch=run.arch) if first == QUANT_BENCHMARK
                 else page_url("dashboards:trends", repo=run.repo, benchmark=first,
                               branch=run.head_branch, arch=run.arch))
        table.links.append({"run": reverse("dashboards:run", args=[run.pk]),
                            "benchmarks": trend})
    return Page(title="Benchmarks", filters={}, tables=[table],
                context={"recent": last_day(timezone.now() - RECENT)})


def last_day(since) -> dict:
    """The panel: alert groups opened since `since` (first detected then: the earliest
    detection of a member, else the group's creation), the reports built since, and every
    device or series silent now. When no group or report is that recent, the latest ones,
    so the panel never dead-ends."""
    groups = (AlertGroup.objects
              .annotate(opened=Coalesce(Min("members__detected_at"), "created_at"),
                        member_count=Count("members"),
                        regression_count=Count("members", filter=Q(
                            members__kind=Regression.Kind.REGRESSION)))
              .order_by("-opened", "-id"))
    reports = NightlyReport.objects.order_by("-day", "repo", "branch")
    recent_groups = list(groups.filter(opened__gte=since)[:SHOWN + 1])
    recent_reports = list(reports.filter(created_at__gte=since)[:SHOWN + 1])
    quiet = not recent_groups and not recent_reports
    if quiet:
        recent_groups = list(groups[:3])
        newest = reports.first()
        recent_reports = list(reports.filter(day=newest.day)[:SHOWN]) if newest else []
    return {
        "since": since, "quiet": quiet,
        "groups": [_group(group) for group in recent_groups[:SHOWN]],
        "more_groups": len(recent_groups) > SHOWN,
        "reports": [_report(report) for report in recent_reports[:SHOWN]],
        "more_reports": len(recent_reports) > SHOWN,
        "silences": list(SilenceAlert.objects.filter(resolved_at__isnull=True)
                         .select_related("series").order_by("-last_seen")[:SHOWN]),
    }


def _group(group: AlertGroup) -> dict:
    return {"group": group, "url": links.group_url(group.pk), "opened": group.opened,
            "members": group.member_count, "regressions": group.regression_count}


def _report(report: NightlyReport) -> dict:
    return {"report": report, "url": report.get_absolute_url(), "totals": totals(report.rows)}
