"""Nightly reports: the list (newest first, with their totals) and a report's page (a table
per benchmark with a row per device, links, and its markdown to copy into a GitHub issue).
A report's page answers `?format=json` with the report's JSON and `?format=markdown` with
the comment itself."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404

from benchsite.regressions.models import NightlyReport
from benchsite.regressions.report import (
    REGRESSION,
    STATES,
    SUSPICIOUS,
    TITLES,
    report_json,
    report_links,
    report_markdown,
    row_links,
    totals,
)
from dashboards.render import Page, Table
from dashboards.state import State

PAGE_SIZE = 100
COUNTS = ["total", *STATES]
COUNT_TITLES = ["series", *(TITLES[state] for state in STATES)]


def build_list(state: State) -> Page:
    repo = state.text("repo")
    reports = NightlyReport.objects.order_by("-day", "repo", "branch")
    if repo:
        reports = reports.filter(repo=repo)
    listed = Paginator(reports, PAGE_SIZE).get_page(state.query.get("page"))
    table = Table("reports", ["day", "repo", "branch", *COUNT_TITLES, "notified"], [])
    for report in reports if state.csv else listed:
        counts = totals(report.rows)
        table.rows.append([report.day.isoformat(), report.repo, report.branch,
                           *(counts[key] for key in COUNTS),
                           report.notified_at.strftime("%Y-%m-%d %H:%M")
                           if report.notified_at else None])
        table.links.append({"day": report.get_absolute_url()})
        table.classes.append(_classes(counts))
    query = state.query.copy()
    query.pop("page", None)
    return Page(title="Nightly reports", filters={"repo": repo, "page": listed.number},
                tables=[table], context={"listed": listed, "query": query.urlencode()})


def _classes(counts: dict) -> dict[str, str]:
    """Regressions and suspicious counts above zero stand out."""
    return {COUNT_TITLES[COUNTS.index(key)]: "worse" for key in (REGRESSION, SUSPICIOUS)
            if counts[key]}


def build_detail(state: State, pk: int) -> Page:
    report = get_object_or_404(NightlyReport, pk=pk)
    table = Table("report", ["benchmark", "device", "arch", *COUNT_TITLES], [])
    benchmarks: dict[str, list[dict]] = {}
    for row in report.rows:
        table.rows.append([row["benchmark"], row["device"], row["arch"],
                           *(row.get(key, 0) for key in COUNTS)])
        table.links.append({})
        table.classes.append(_classes(row))
        benchmarks.setdefault(row["benchmark"], []).append(
            {**row, "links": row_links(report, row),
             "counts": [(row.get(key, 0), key in (REGRESSION, SUSPICIOUS) and row[key] > 0)
                        for key in COUNTS]})
    sections = [{"benchmark": benchmark, "rows": rows,
                 "totals": [totals(rows)[key] for key in COUNTS] if len(rows) > 1 else None}
                for benchmark, rows in benchmarks.items()]
    return Page(
        title=f"Nightly report {report.repo}@{report.branch} {report.day.isoformat()}",
        filters={"report": report.pk}, tables=[table],
        context={"report": report, "sections": sections, "totals": totals(report.rows),
                 "count_titles": COUNT_TITLES, "links": report_links(report),
                 "markdown": report_markdown(report)},
    )


def formats(view):
    """A report's page, or (`?format=json`, `?format=markdown`) the report's own JSON or
    markdown; `?format=csv` and HTML go to `view`."""

    def report_view(request, pk: int):
        output = request.GET.get("format")
        if output not in ("json", "markdown"):
            return view(request, pk=pk)
        report = get_object_or_404(NightlyReport, pk=pk)
        if output == "json":
            return JsonResponse(report_json(report))
        return HttpResponse(report_markdown(report), content_type="text/markdown; charset=utf-8")

    return report_view
