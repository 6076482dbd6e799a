"""The nightly report (the PyTorch HUD's regression report): for one repo, default branch and
day (UTC), per benchmark and device, how many series reported and what detection made of
each, as of the end of that day; as JSON, and as markdown ready for a GitHub issue comment,
sent to the notification targets once.

A series' state, the first that applies:

- "regression": a record of that kind (any detector), coinciding with no environment
  change, was raised for it that day (its `detected_at`, the time of the newest point when
  it was raised, falls on the day; its creation time where it has none). A record its A/B
  try job did not reproduce (`regressions.confirmation`) is not counted.
- "environment": a record raised that day (of any kind) coincides with a change of the
  runs' environment (`Regression.environment_change`: a new torch nightly, driver...): the
  likelier cause, told apart from the code's regressions and improvements.
- "suspicious": a record of unknown direction ("change") or one the HUD policy raised as
  "suspicious" was raised for it that day.
- "improvement": a record of that kind was raised for it that day.
- "suspicious" too: nothing raised, but the HUD policy's verdict on its points since its
  latest recorded change (`changes.recorded_changes`: change-point records, false positives
  excluded) up to the end of the day is "regression" or "suspicious": a change raised on
  an earlier night is not suspicious again, a new change on top of it is. Too few points
  since the change for the HUD's windows is no regression (unless the next rule applies).
- "insufficient data": fewer points of history than the change-point detector needs
  (`min_before + min_after`).
- "no regression" otherwise.

The series counted are those with results in the day's runs of the repo and branch (the
"status" records of cells that did not run left out), and those a record was raised for
that day (a metric a run stopped reporting is a regression of the night without a result).
A series with only text results that day (accuracy) has no numeric history: it is a
regression when the accuracy check raised one, else no regression.

Beside the counts, the report lists the day's environment changes of its repo and branch
(`results.EnvironmentChange`) and the triage precision of the alerts raised in the
`precision_days` up to its day (`regressions.precision`: per detector, and the benchmarks
under the floor with a threshold that would have avoided their invalid alerts); both are
read when the report is shown or sent, so the precision counts the latest triage.

A report with a record of its day still held for its confirmation (`held_until`) waits:
built, not sent, and built again and sent (`send_waiting`) once none is held.

Histories and recorded changes are read with one query each per chunk of series
(`history.recent`, `changes.recorded_changes`), never per series.

Generic webhook payload (JSON, POST):

    {"event": "nightly_report", "repo": "pytorch/ao", "branch": "main",
     "day": "2025-11-07", "url": "https://bench.example/regressions/reports/3/",
     "markdown": "...", "rows": [<report_json rows: the target's benchmarks>]}
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import UTC, date, datetime, time, timedelta

from django.conf import settings as site_settings
from django.core.mail import send_mail
from django.db.models import Q
from django.utils import timezone

from benchsite import links
from benchsite.comparison.directions import better_for
from benchsite.comparison.history import recent
from benchsite.comparison.stored_baselines import level_start
from benchsite.regressions import notify
from benchsite.regressions.changes import recorded_changes
from benchsite.regressions.detect import hud_policy
from benchsite.regressions.models import (
    DetectionSettings,
    NightlyReport,
    NotificationTarget,
    Regression,
)
from benchsite.regressions.precision import Precision, triage_precision
from benchsite.results.models import EnvironmentChange, Result, Run, Series
from runner.contract.status import STATUS_METRIC

logger = logging.getLogger(__name__)

REGRESSION, SUSPICIOUS, IMPROVEMENT = "regression", "suspicious", "improvement"
ENVIRONMENT = "environment"
NO_REGRESSION, INSUFFICIENT = "no_regression", "insufficient_data"
# Row keys of the counts, in the order tables show them, and their column titles.
STATES = (REGRESSION, ENVIRONMENT, SUSPICIOUS, IMPROVEMENT, NO_REGRESSION, INSUFFICIENT)
TITLES = {REGRESSION: "regressions", ENVIRONMENT: "environment changes",
          SUSPICIOUS: "suspicious", IMPROVEMENT: "improvements",
          NO_REGRESSION: "no regression", INSUFFICIENT: "insufficient data"}
# A record's kind as a series' state; when a series has several, the first listed wins.
RECORD_STATES = {Regression.Kind.REGRESSION: REGRESSION, Regression.Kind.CHANGE: SUSPICIOUS,
                 Regression.Kind.SUSPICIOUS: SUSPICIOUS, Regression.Kind.IMPROVEMENT: IMPROVEMENT}
PRECEDENCE = {state: rank for rank, state in enumerate(STATES)}
CHUNK = 2000  # series whose histories one query reads
TREND_DAYS = 30  # the trends page linked shows this many days up to the report's
COMMENT_LIMIT = 60_000  # GitHub comments hold 65,536 characters
SLACK_SECTION = 2_900  # a Slack section holds 3,000
SLACK_HEADER = 150
ENVIRONMENT_LINES = 20  # environment changes the markdown lists (the JSON has them all)
SLACK_ENVIRONMENT_LINES = 5


# Building


def day_bounds(day: date) -> tuple[datetime, datetime]:
    """[start, end) of a day in UTC."""
    start = datetime.combine(day, time(0), tzinfo=UTC)
    return start, start + timedelta(days=1)


def yesterday() -> date:
    return timezone.now().astimezone(UTC).date() - timedelta(days=1)


def build_report(repo: str, branch: str, day: date,
                 settings: DetectionSettings | None = None) -> NightlyReport:
    """Count the day's series of (repo, branch) by state, per benchmark and device, and
    store the report (replacing an earlier one of the same day; its notification stays)."""
    settings = settings or DetectionSettings.load()
    start, end = day_bounds(day)
    runs = Run.objects.filter(repo=repo, head_branch=branch, timestamp__gte=start,
                              timestamp__lt=end)
    results = Result.objects.of_runs(runs.only("pk", "timestamp", "last_timestamp")).order_by()
    reported = set(results.values_list("series_id", flat=True).distinct())
    numeric = set(results.filter(value__isnull=False).values_list("series_id", flat=True)
                  .distinct())
    raised = (_raised(repo, branch, start, end)
              .exclude(confirmation=Regression.Confirmation.NOT_REPRODUCED)
              .order_by().values_list("series_id", "kind", "group_id", "environment_change_id"))
    states: dict[int, str] = {}
    groups: defaultdict[int, set[int]] = defaultdict(set)
    for series_id, kind, group_id, environment in raised:
        state = ENVIRONMENT if environment is not None else RECORD_STATES.get(kind, SUSPICIOUS)
        current = states.get(series_id)
        if current is None or PRECEDENCE[state] < PRECEDENCE[current]:
            states[series_id] = state
        if group_id is not None:
            groups[series_id].add(group_id)
    series = {pk: one for pk, one in Series.objects.in_bulk(reported | set(states)).items()
              if one.metric != STATUS_METRIC}
    judged = sorted(pk for pk in series if pk not in states and pk in numeric)
    for first in range(0, len(judged), CHUNK):
        states.update(_judge(judged[first : first + CHUNK], series, branch, end, settings))
    rows: dict[tuple[str, str, str], dict] = {}
    for pk, one in series.items():
        key = (one.benchmark, one.device, one.arch)
        row = rows.setdefault(key, {"benchmark": one.benchmark, "device": one.device,
                                    "arch": one.arch, "total": 0,
                                    **dict.fromkeys(STATES, 0), "groups": set()})
        row["total"] += 1
        row[states.get(pk, NO_REGRESSION)] += 1
        row["groups"] |= groups.get(pk, set())
    ordered = [{**row, "groups": sorted(row["groups"])}
               for _, row in sorted(rows.items(), key=lambda item: (
                   item[0][0], item[0][2] or item[0][1], item[0][1]))]
    report, _ = NightlyReport.objects.update_or_create(
        repo=repo, branch=branch, day=day, defaults={"rows": ordered})
    return report


def _raised(repo: str, branch: str, start: datetime, end: datetime):
    """The records raised in (start, end]: by the time of their newest point."""
    return (Regression.objects.filter(series__repo=repo, branch=branch)
            .filter(Q(detected_at__gte=start, detected_at__lt=end)
                    | Q(detected_at__isnull=True, created_at__gte=start, created_at__lt=end)))


def _judge(ids: list[int], series: dict[int, Series], branch: str, end: datetime,
           settings: DetectionSettings) -> dict[int, str]:
    """The state of series nothing was raised for: the HUD policy's verdict on their
    points since their latest recorded change up to `end` (a change already raised is not
    flagged again), else whether their whole history is long enough to judge."""
    changepoint = settings.changepoint_params()
    needed = changepoint.min_before + changepoint.min_after
    wanted = max(needed, settings.baseline_points + settings.comparison_points)
    until = end - timedelta(microseconds=1)
    histories = recent(ids, wanted, [branch], until=until)
    changes = recorded_changes(ids, [branch], until=until, raised_by=until)
    directions = better_for([series[pk] for pk in ids],
                            {pk: history.unit for pk, history in histories.items()})
    states = {}
    for pk in ids:
        history = histories.get(pk)
        direction = directions.get(pk)
        if history is not None and direction is not None:
            params = settings.hud_params(series[pk].metric, series[pk].benchmark)
            values = history.values[level_start(history, changes.get(pk, [])):]
            verdict = hud_policy.status(values, direction, params)
            if verdict in (hud_policy.REGRESSION, hud_policy.SUSPICIOUS):
                states[pk] = SUSPICIOUS
                continue
        states[pk] = INSUFFICIENT if history is None or len(history) < needed else NO_REGRESSION
    return states


def nightly_reports(day: date | None = None, repo: str | None = None, send: bool = True,
                    settings: DetectionSettings | None = None) -> list[NightlyReport]:
    """Build the reports of every repo (or `repo`) and default branch with runs on `day`
    (default: yesterday, UTC), and notify each once (unless `send` is False)."""
    settings = settings or DetectionSettings.load()
    day = day or yesterday()
    start, end = day_bounds(day)
    runs = Run.objects.filter(timestamp__gte=start, timestamp__lt=end)
    if repo is not None:
        runs = runs.filter(repo=repo)
    pairs = sorted(set(runs.order_by().values_list("repo", "head_branch").distinct()))
    reports = [build_report(name, branch, day, settings) for name, branch in pairs
               if branch in settings.branches_for(name)]
    if send:
        for report in reports:
            if _held(report):  # sent by `send_waiting` once its confirmations end
                NightlyReport.objects.filter(pk=report.pk).update(waiting=True)
            else:
                notify_report(report)
    return reports


def _held(report: NightlyReport) -> bool:
    """Whether a regression of its day waits for its confirmation (`held_until`)."""
    start, end = day_bounds(report.day)
    return _raised(report.repo, report.branch, start, end).filter(
        held_until__isnull=False).exists()


def send_waiting() -> int:
    """The reports that waited for confirmations, built again and sent once none of their
    day is held (at the latest when the time limit releases them); returns how many."""
    sent = 0
    for report in NightlyReport.objects.filter(waiting=True, notified_at__isnull=True):
        if not _held(report):
            report = build_report(report.repo, report.branch, report.day)
            NightlyReport.objects.filter(pk=report.pk).update(waiting=False)
            sent += notify_report(report)
    return sent


# Reading


def totals(rows: list[dict]) -> dict[str, int]:
    """The counts of these rows added up: total and each state (a report stored before a
    state existed counts none of it)."""
    return {key: sum(row.get(key, 0) for row in rows) for key in ("total", *STATES)}


def environment_changes(report: NightlyReport) -> list[EnvironmentChange]:
    """The environment changes of the report's repo and branch on its day, and those the
    day's raised records coincide with (a change is raised some points after it), by
    time."""
    start, end = day_bounds(report.day)
    coinciding = (_raised(report.repo, report.branch, start, end)
                  .filter(environment_change__isnull=False)
                  .values("environment_change_id"))
    return list(EnvironmentChange.objects.filter(repo=report.repo, branch=report.branch).filter(
        Q(at__gte=start, at__lt=end) | Q(pk__in=coinciding)).order_by("at", "id"))


def environment_json(change: EnvironmentChange) -> dict:
    return {"at": change.at.isoformat(), "device": change.device, "arch": change.arch,
            "name": change.name, "summary": change.summary}


def report_precision(report: NightlyReport) -> Precision:
    """The triage precision of the report's repo and branch up to the end of its day."""
    return triage_precision(end=day_bounds(report.day)[1], repo=report.repo,
                            branch=report.branch)


def site_url(path: str) -> str:
    return site_settings.BENCH_SITE_URL.rstrip("/") + path


def row_links(report: NightlyReport, row: dict) -> dict:
    """Paths of a row's pages: the benchmark's trends on the device (the month up to the
    report's day), its regressions, and the alert groups raised for it that day."""
    trends = {"repo": report.repo, "benchmark": row["benchmark"], "branch": report.branch,
              "arch": row["arch"], "start": str(report.day - timedelta(days=TREND_DAYS - 1)),
              "end": str(report.day)}
    listed = {"state": "any", "repo": report.repo, "benchmark": row["benchmark"],
              "device": row["arch"] or row["device"]}
    return {"trends": links.trends_url(**trends),
            "regressions": links.regressions_url(**listed),
            "groups": [{"id": pk, "url": links.group_url(pk)} for pk in row["groups"]]}


def report_links(report: NightlyReport) -> dict:
    """Paths of the report's own pages and of every group raised that day."""
    path = report.get_absolute_url()
    groups = sorted({pk for row in report.rows for pk in row["groups"]})
    return {"url": path, "json": f"{path}?format=json", "markdown": f"{path}?format=markdown",
            "regressions": links.regressions_url(state="any", repo=report.repo),
            "groups": [{"id": pk, "url": links.group_url(pk)} for pk in groups]}


def report_json(report: NightlyReport, rows: list[dict] | None = None) -> dict:
    """The report with absolute links (only `rows` where given: a target's benchmarks)."""
    rows = report.rows if rows is None else rows
    links = report_links(report)
    return {
        "id": report.pk, "repo": report.repo, "branch": report.branch,
        "day": report.day.isoformat(), "url": site_url(links["url"]),
        "markdown_url": site_url(links["markdown"]),
        "regressions_url": site_url(links["regressions"]),
        "created_at": report.created_at.isoformat(),
        "notified_at": report.notified_at.isoformat() if report.notified_at else None,
        "totals": totals(rows),
        "groups": [{"id": g["id"], "url": site_url(g["url"])} for g in links["groups"]],
        "rows": [{**{key: row[key] for key in ("benchmark", "device", "arch", "total")},
                  **{key: row.get(key, 0) for key in STATES},
                  "links": _absolute(row_links(report, row))} for row in rows],
        "environment_changes": [environment_json(c) for c in environment_changes(report)],
        "precision": report_precision(report).as_json(benchmarks=False),
    }


def _absolute(links: dict) -> dict:
    return {"trends": site_url(links["trends"]), "regressions": site_url(links["regressions"]),
            "groups": [{"id": g["id"], "url": site_url(g["url"])} for g in links["groups"]]}


def summary(counts: dict[str, int]) -> str:
    """"3 regressions, 1 suspicious, 0 improvements, 230 no regression, 6 insufficient
    data"."""
    return ", ".join(counted(counts[state], state) for state in STATES)


def counted(number: int, state: str) -> str:
    """"1 regression", "2 regressions", "3 suspicious"."""
    title = TITLES[state]
    return f"{number} {title[:-1] if number == 1 and title.endswith('s') else title}"


def md_text(value: str) -> str:
    """Names come from uploads: no markdown, no HTML, no table breaks in a comment (as the
    CI gate's comment escapes them)."""
    escaped = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for char in "\\`*_[]|#!~":
        escaped = escaped.replace(char, "\\" + char)
    return " ".join(escaped.split())


def report_markdown(report: NightlyReport, rows: list[dict] | None = None) -> str:
    """A GitHub comment: a title, the totals and links, then a table per benchmark with a
    row per device (and a total row where there are several)."""
    rows = report.rows if rows is None else rows
    links = report_links(report)
    counts = totals(rows)
    lines = [f"## Nightly benchmark report: {md_text(report.repo)} @ {md_text(report.branch)}, "
             f"{report.day.isoformat()} (UTC)", "",
             f"**{counts['total']} series**: {summary(counts)}.", "",
             f"[Report]({site_url(links['url'])}) · "
             f"[Regressions]({site_url(links['regressions'])})"]
    groups = {pk for row in rows for pk in row["groups"]}
    if groups:
        lines[-1] += " · Alert groups raised: " + ", ".join(
            f"[#{g['id']}]({site_url(g['url'])})" for g in links["groups"] if g["id"] in groups)
    lines += _md_environment(environment_changes(report))
    tail = _md_precision(report_precision(report))
    by_benchmark: dict[str, list[dict]] = {}
    for row in rows:
        by_benchmark.setdefault(row["benchmark"], []).append(row)
    header = ["Device", "Total", *(TITLES[state].capitalize() for state in STATES), "Links"]
    size = sum(len(line) + 1 for line in [*lines, *tail])
    for number, (benchmark, mine) in enumerate(by_benchmark.items()):
        table = ["", f"### {md_text(benchmark)}", "", "| " + " | ".join(header) + " |",
                 "| --- | " + "---: | " * (1 + len(STATES)) + "--- |"]
        for row in mine:
            table.append(_md_row(md_text(row["arch"] or row["device"] or "unknown"), row,
                                 _md_links(report, row)))
        if len(mine) > 1:
            table.append(_md_row("**Total**", totals(mine), ""))
        grown = size + sum(len(line) + 1 for line in table)
        if grown > COMMENT_LIMIT:
            lines += ["", f"… and {len(by_benchmark) - number} more benchmarks: "
                          f"[the full report]({site_url(links['url'])})"]
            break
        lines += table
        size = grown
    return "\n".join(lines + tail) + "\n"


def _md_environment(changes: list[EnvironmentChange]) -> list[str]:
    """A line per environment change of the day (or that the day's records coincide with):
    when, where, which job, what changed."""
    if not changes:
        return []
    lines = ["", "### Environment changes", "",
             "Regressions that coincide with one are counted as environment changes, not "
             "as regressions.", ""]
    for change in changes[:ENVIRONMENT_LINES]:
        where = md_text(change.arch or change.device or "unknown")
        job = f" · {md_text(change.name)}" if change.name else ""
        lines.append(f"- {change.at:%Y-%m-%d %H:%M} {where}{job}: {md_text(change.summary)}")
    if len(changes) > ENVIRONMENT_LINES:
        lines.append(f"- … and {len(changes) - ENVIRONMENT_LINES} more")
    return lines


def _md_precision(precision: Precision) -> list[str]:
    """The triage precision per detector that raised alerts in the window, and the
    benchmarks under the floor with their suggestions; nothing without alerts."""
    rows = [row for row in precision.detector_rows()
            if row["score"].labels or row["score"].unlabelled]
    if not rows:
        return []
    lines = ["", f"### Triage precision (last {precision.days} days)", "",
             "| Detector | Labels | Valid | Invalid | Precision (95 % interval) | Unlabelled |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for row in rows:
        score = row["score"]
        lines.append(f"| {row['label']} | {score.labels} | {score.valid} | {score.invalid} | "
                     f"{score.text} | {score.unlabelled} |")
    below = precision.floor_rows()
    if below:
        lines += ["", f"Under {precision.floor_text} precision "
                      f"({precision.min_labels}+ labels):", ""]
    for row in below:
        said = "; ".join(s.text for s in row["suggestions"]) or "no threshold change avoids " \
            "its invalid alerts"
        lines.append(f"- {md_text(row['benchmark'])}: {row['score'].text} of "
                     f"{row['score'].labels} labels; {md_text(said)}")
    return lines


def _md_row(label: str, counts: dict, links: str) -> str:
    cells = [label, str(counts["total"]), *(str(counts.get(state, 0)) for state in STATES),
             links]
    return "| " + " | ".join(cells) + " |"


def _md_links(report: NightlyReport, row: dict) -> str:
    links = row_links(report, row)
    parts = [f"[trends]({site_url(links['trends'])})",
             f"[regressions]({site_url(links['regressions'])})"]
    parts += [f"[group #{g['id']}]({site_url(g['url'])})" for g in links["groups"]]
    return " · ".join(parts)


# Notifying


def headline(report: NightlyReport, rows: list[dict] | None = None) -> str:
    counts = totals(report.rows if rows is None else rows)
    return (f"Nightly report {report.repo}@{report.branch} {report.day.isoformat()}: "
            f"{counted(counts[REGRESSION], REGRESSION)}, {counts[SUSPICIOUS]} suspicious "
            f"of {counts['total']} series")


def notify_report(report: NightlyReport) -> bool:
    """Send the report to every enabled target whose repo and benchmarks match it (each
    target gets its benchmarks' rows), once: False when it was notified before. A failing
    target is logged and does not keep the others from being told."""
    if not report.rows:
        return False
    claimed = NightlyReport.objects.filter(pk=report.pk, notified_at__isnull=True).update(
        notified_at=timezone.now())
    if not claimed:
        return False
    for target in NotificationTarget.objects.filter(enabled=True):
        rows = [row for row in report.rows if target.matches(report.repo, row["benchmark"])]
        if not rows:
            continue
        try:
            if target.kind == NotificationTarget.Kind.EMAIL:
                send_mail(f"[benchsite] {headline(report, rows)}",
                          report_markdown(report, rows), None, [target.email])
            elif target.kind == NotificationTarget.Kind.SLACK:
                notify.post_json(target.url, _slack(report, rows))
            else:
                data = report_json(report, rows)
                notify.post_json(target.url, {
                    "event": "nightly_report", "repo": report.repo, "branch": report.branch,
                    "day": data["day"], "url": data["url"],
                    "markdown": report_markdown(report, rows), "rows": data["rows"]})
        except (OSError, ValueError) as error:  # URLError, SMTP errors, bad URLs
            logger.warning("nightly report to %s failed: %s", target, error)
    return True


def _slack(report: NightlyReport, rows: list[dict]) -> dict:
    """A header, then a line per benchmark and device with something to look at (the most
    regressions first), within a section's size, and the link to the report."""
    title = headline(report, rows)
    url = site_url(report.get_absolute_url())
    lines = [f"<{url}|Full report> · {_slack_text(summary(totals(rows)))}"]
    changes = environment_changes(report)
    for change in changes[:SLACK_ENVIRONMENT_LINES]:
        where = change.arch or change.device or "unknown"
        lines.append(_slack_text(f"• environment · {where}: {change.summary}"
                                 [:notify.SLACK_LINE]))
    if len(changes) > SLACK_ENVIRONMENT_LINES:
        lines.append(f"• … and {len(changes) - SLACK_ENVIRONMENT_LINES} more environment "
                     "changes")
    size = sum(len(line) + 1 for line in lines)
    flagged = sorted((row for row in rows if row[REGRESSION] or row[SUSPICIOUS]),
                     key=lambda row: (-row[REGRESSION], -row[SUSPICIOUS], row["benchmark"]))
    for number, row in enumerate(flagged):
        where = f"{row['benchmark']} · {row['arch'] or row['device'] or 'unknown'}"
        line = _slack_text(f"• {where}: {counted(row[REGRESSION], REGRESSION)}, "
                           f"{row[SUSPICIOUS]} suspicious of {row['total']}"[:notify.SLACK_LINE])
        if size + len(line) + 60 > SLACK_SECTION:
            lines.append(f"… and {len(flagged) - number} more")
            break
        lines.append(line)
        size += len(line) + 1
    return {"text": title, "blocks": [
        {"type": "header", "text": {"type": "plain_text", "text": title[:SLACK_HEADER]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}}]}


def _slack_text(text: str) -> str:
    """Slack mrkdwn: &, < and > are control characters (links, mentions)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
