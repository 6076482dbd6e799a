"""Notifications of new regressions and stopped-reporting alerts: webhooks (generic JSON or
Slack-compatible) and email.

All outbound HTTP goes through `post_json`, the one place tests replace or observe. A
failing target is logged and does not keep the others from being told.

Regressions are told by alert group, once per group: the groups of the new regressions that
hold a notified kind (regressions, changes of unknown direction; improvements and HUD
"suspicious" findings are shown on the site only) are claimed (`AlertGroup.notified_at` set
where it was empty, and their members' `notified_at` with it) before they are sent, so a
re-run detection or a retried task never notifies twice, and a member that joins a group
after it was told is not told again (the group's page lists it). Regressions without a
group (recorded before groups existed) are claimed and told one by one. Stopped-reporting
alerts are claimed the same way. A target (repo and benchmark patterns) gets a group when
it matches any member's repo and benchmark.

Generic webhook payload (JSON, POST):

    {"event": "regressions",            # or "stopped_reporting"
     "count": 1,                        # items: groups (and ungrouped regressions)
     "items": [{"type": "group", "id": 3,
                "url": "https://bench.example/regressions/groups/3/",
                "repo": "pytorch/ao", "branch": "main",
                "last_good_sha": "...", "first_bad_sha": "...",   # the members' intersection
                "last_good_at": "...", "first_bad_at": "2025-11-07T03:00:00+00:00",
                "counts": {"members": 6, "regressions": 5, "improvements": 1, "others": 0},
                "alerting": 5,          # members of the notified kinds
                "benchmarks": ["..."], "devices": ["NVIDIA H100 80GB HBM3"],
                "recipes_or_backends": ["int8wo"],
                "median_magnitude": -0.2, "worst_magnitude": -0.31,   # for the better
                "compare_url": "https://bench.example/compare/GOOD...BAD?repo=pytorch%2Fao",
                "github_url": "https://github.com/pytorch/ao/compare/GOOD...BAD",
                "members": [REGRESSION, ...],   # up to 15, the notified kinds and worst first
                "more_members": 0}]}

Magnitudes "for the better" (`benchsite.regressions.groups`): an improvement's size is
positive, anything else's negative; the worst is the most negative. A REGRESSION item (a
group's member, or an ungrouped regression, then with "type": "regression"):

    {"type": "regression", "id": 7, "url": "https://bench.example/regressions/7/",
     "group": 3, "branch": "main",
     "repo": "pytorch/ao", "benchmark": "...", "model": "...", "metric": "...",
     "mode": "...", "dtype": "...", "backend": "...", "device": "...", "arch": "...",
     "detector": "changepoint", "kind": "regression", "direction": "lower",
     "baseline": 1.23, "value": 1.38, "magnitude": 0.12, "confidence": 1e-07,
     "last_good_sha": "...", "first_bad_sha": "...",
     "first_bad_at": "2025-11-07T03:00:00+00:00",
     "confirmation": "confirmed",       # null (not asked), confirmed, unconfirmed (the time
     "confirmation_note": "+12.3 %, p=0.002 (A/B try job 5)",  # limit), not_confirmable...
     "environment_change": "torch 2.13.0.dev20261120 -> 2.13.0.dev20261121; cuda unchanged",
                                        # or null: none on its device within its range
     "culprit": {"sha": "...", "subject": "...", "author": "...", "url": "...",
                 "bisect_url": "..."}}    # or null: one a bisect found before it was told

(its magnitude is the metric's own relative change, signed: 0.12 is 12 % up; accuracy
checks and missing metrics are baseline 1, value 0, magnitude -1.)

A stopped-reporting item: {"id", "url", "repo", "device", "arch", "series" (its
description, or null for a whole device), "last_seen", "usual_gap_hours"}.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Sequence

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Model, Prefetch
from django.utils import timezone

from benchsite import links
from benchsite.regressions.groups import CHANGE_TEXTS, github_compare_url, summarize
from benchsite.regressions.models import (
    AlertGroup,
    DetectionSettings,
    NotificationTarget,
    Regression,
    SilenceAlert,
)

logger = logging.getLogger(__name__)
TIMEOUT_S = 10
MAX_LISTED = 15  # items spelled out in one Slack message or email
SLACK_LINE = 150
SLACK_SECTION = 2900  # a section holds at most 3,000 characters
SLACK_HEADER = 150  # a header, at most 150


def post_json(url: str, payload: dict) -> int:
    """POST `payload` as JSON; returns the HTTP status. Raises OSError (URLError) on
    failure."""
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "benchsite-alerts"})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        return response.status


def notify_regressions(regressions: Sequence[Regression]) -> int:
    """Tell every matching target about the alert groups of these regressions that hold a
    notified kind, each group once, and about ungrouped ones one by one, each once; returns
    how many items (groups and ungrouped regressions) were sent. A regression whose
    confirmation holds it (`held_until`), or that was not reproduced, is not told (nor
    its group, for it): `regressions.confirmation` calls again once it is released. One
    that coincides with an environment change is told only with the detection setting
    `notify_environment_changes` (the nightly report counts it apart either way)."""
    wanted = Regression.objects.filter(
        pk__in=[r.pk for r in regressions], kind__in=Regression.NOTIFIED_KINDS,
        held_until__isnull=True).exclude(confirmation=Regression.Confirmation.NOT_REPRODUCED)
    if not DetectionSettings.load().notify_environment_changes:
        wanted = wanted.filter(environment_change__isnull=True)
    wanted = list(wanted)
    groups = _claim_groups({r.group_id for r in wanted if r.group_id is not None})
    ungrouped = _claim(Regression, [r for r in wanted if r.group_id is None])
    items = [*groups, *ungrouped]
    if items:
        _send(items, "regressions", _regression_where, _regression_or_group_item)
    return len(items)


def notify_silences(alerts: Sequence[SilenceAlert]) -> int:
    claimed = _claim(SilenceAlert, list(alerts))
    if claimed:
        _send(claimed, "stopped_reporting",
              lambda a: [(a.repo, a.series.benchmark if a.series_id else "")], _silence_item)
    return len(claimed)


def _claim(model: type[Model], items: list) -> list:
    """The items this call may notify: those whose `notified_at` it set."""
    claimed = []
    for item in items:
        if model.objects.filter(pk=item.pk, notified_at__isnull=True).update(
                notified_at=timezone.now()):
            claimed.append(item)
    return claimed


def _claim_groups(ids: set[int]) -> list[AlertGroup]:
    """The groups this call may notify (their members loaded): those whose `notified_at` it
    set, with their members'."""
    claimed = []
    for pk in sorted(ids):
        now = timezone.now()
        with transaction.atomic():
            if AlertGroup.objects.filter(pk=pk, notified_at__isnull=True).update(
                    notified_at=now):
                Regression.objects.filter(group_id=pk, notified_at__isnull=True).update(
                    notified_at=now)
                claimed.append(pk)
    if not claimed:
        return []
    members = Prefetch("members", Regression.objects.select_related("series", "environment_change")
                       .order_by("pk"))
    return list(AlertGroup.objects.filter(pk__in=claimed).prefetch_related(members)
                .order_by("-first_bad_at", "-id"))


def _regression_where(item: AlertGroup | Regression) -> list[tuple[str, str]]:
    """The (repo, benchmark) pairs a target may match: a group's members', or a regression's."""
    if isinstance(item, AlertGroup):
        return [(item.repo, member.series.benchmark) for member in item.members.all()]
    return [(item.series.repo, item.series.benchmark)]


def _send(items: list, event: str, where, describe) -> None:
    """Each enabled target gets the items one of whose `where` (repo, benchmark) pairs it
    matches."""
    described = {}
    for target in NotificationTarget.objects.filter(enabled=True):
        mine = [item for item in items
                if any(target.matches(*pair) for pair in where(item))]
        if not mine:
            continue
        for item in mine:
            if id(item) not in described:
                described[id(item)] = describe(item)
        told = [described[id(item)] for item in mine]
        try:
            if target.kind == NotificationTarget.Kind.EMAIL:
                subject, body = _email(event, told)
                send_mail(subject, body, None, [target.email])
            elif target.kind == NotificationTarget.Kind.SLACK:
                post_json(target.url, _slack(event, told))
            else:
                post_json(target.url, {"event": event, "count": len(told), "items": told})
        except (OSError, ValueError) as error:  # URLError, SMTP errors, bad URLs
            logger.warning("notification to %s failed: %s", target, error)


def _url(path: str) -> str:
    return settings.BENCH_SITE_URL.rstrip("/") + path


def _regression_or_group_item(item: AlertGroup | Regression) -> dict:
    return _group_item(item) if isinstance(item, AlertGroup) else _regression_item(item)


def _group_item(group: AlertGroup) -> dict:
    summary = summarize(group.members.all())
    listed = summary.listed(MAX_LISTED)
    compare = (links.compare_url(group.last_good_sha, group.first_bad_sha, repo=group.repo)
               if group.last_good_sha and group.last_good_sha != group.first_bad_sha else "")
    return {
        "type": "group", "id": group.pk, "url": _url(group.get_absolute_url()),
        "repo": group.repo, "branch": group.branch, "last_good_sha": group.last_good_sha,
        "first_bad_sha": group.first_bad_sha,
        "last_good_at": group.last_good_at.isoformat() if group.last_good_at else None,
        "first_bad_at": group.first_bad_at.isoformat(),
        "counts": {"members": len(summary.members), "regressions": summary.regressions,
                   "improvements": summary.improvements, "others": summary.others},
        "alerting": summary.notified, "benchmarks": summary.benchmarks,
        "devices": summary.devices, "recipes_or_backends": summary.variants,
        "median_magnitude": summary.median, "worst_magnitude": summary.worst,
        "compare_url": _url(compare) if compare else None,
        "github_url": github_compare_url(group.repo, group.last_good_sha,
                                         group.first_bad_sha) or None,
        "members": [_regression_item(member) for member in listed],
        "more_members": len(summary.members) - len(listed),
    }


def _regression_item(regression: Regression) -> dict:
    series = regression.series
    return {
        "type": "regression", "id": regression.pk, "url": _url(regression.get_absolute_url()),
        "group": regression.group_id, "branch": regression.branch,
        "repo": series.repo, "benchmark": series.benchmark, "model": series.model,
        "metric": series.metric, "mode": series.mode, "dtype": series.dtype,
        "backend": series.backend, "device": series.device, "arch": series.arch,
        "detector": regression.detector, "kind": regression.kind,
        "direction": regression.direction or None, "baseline": regression.baseline,
        "value": regression.value, "magnitude": regression.magnitude,
        "confidence": regression.confidence, "last_good_sha": regression.last_good_sha,
        "first_bad_sha": regression.first_bad_sha,
        "first_bad_at": regression.first_bad_at.isoformat(),
        "confirmation": regression.confirmation or None,
        "confirmation_note": regression.confirmation_note,
        "environment_change": (regression.environment_change.summary
                               if regression.environment_change_id else None),
        "culprit": ({**regression.culprit, "bisect_url": _url(regression.culprit["bisect_url"])}
                    if regression.culprit else None),
    }


def _silence_item(alert: SilenceAlert) -> dict:
    return {
        "id": alert.pk, "url": _url(links.regressions_url()), "repo": alert.repo,
        "device": alert.device, "arch": alert.arch,
        "series": str(alert.series) if alert.series_id else None,
        "last_seen": alert.last_seen.isoformat(),
        "usual_gap_hours": round(alert.usual_gap.total_seconds() / 3600, 2),
    }


def _line(item: dict) -> str:
    """One item as plain text."""
    if item.get("type") == "group":
        counts = item["counts"]
        what = [f"{counts['regressions']} regression{'s' if counts['regressions'] != 1 else ''}"]
        what += [f"{counts[key]} {key if counts[key] != 1 else key[:-1]}"
                 for key in ("improvements", "others") if counts[key]]
        where = ", ".join(item["benchmarks"]) + (
            f" on {', '.join(item['devices'])}" if item["devices"] else "")
        worst = item["worst_magnitude"]
        return (f"{', '.join(what)} in {where} ({item['repo']}@{item['branch']}) between "
                f"{item['last_good_sha'][:10] or '?'} and {item['first_bad_sha'][:10]}"
                + (f", worst {-worst:.1%} worse" if worst is not None and worst < 0 else ""))
    if "magnitude" in item:
        what = " / ".join(item[key] for key in ("benchmark", "model", "metric", "arch") if
                          item[key])
        change = CHANGE_TEXTS.get(item["detector"]) or f"{item['magnitude']:+.1%}"
        return (f"{item['kind']} {change} in {what} ({item['repo']}) "
                f"between {item['last_good_sha'][:10] or '?'} and {item['first_bad_sha'][:10]}"
                f" [{item['detector']}]" + _confirmed(item))
    subject = item["series"] or item["arch"] or item["device"]
    return (f"{subject} ({item['repo']}) silent since {item['last_seen']} "
            f"(usually every {item['usual_gap_hours']} h)")


def _confirmed(item: dict) -> str:
    """A member's confirmation and culprit, as a line's end."""
    said = ""
    if item.get("environment_change"):
        said += f", environment: {item['environment_change']}"
    if item.get("confirmation"):
        note = item["confirmation_note"]
        said = f", {item['confirmation'].replace('_', ' ')}" + (f" ({note})" if note else "")
    if culprit := item.get("culprit"):
        said += (f", culprit {culprit['sha'][:12]} \"{culprit['subject']}\" by "
                 f"{culprit['author']}")
    return said


def _headline(event: str, items: list[dict]) -> str:
    if event == "regressions":
        groups = sum(1 for item in items if item.get("type") == "group")
        count = sum(item["alerting"] if item.get("type") == "group" else 1 for item in items)
        where = f" in {groups} alert group{'s' if groups != 1 else ''}" if groups else ""
        return f"{count} new regression{'s' if count != 1 else ''} detected{where}"
    count = len(items)
    return f"{count} device{'s' if count != 1 else ''} or series stopped reporting"


def _email(event: str, items: list[dict]) -> tuple[str, str]:
    lines = []
    for item in items[:MAX_LISTED]:
        lines.append(f"- {_line(item)}\n  {item['url']}")
        members = item.get("members", [])
        lines += [f"    - {_line(member)}\n      {member['url']}" for member in members]
        if item.get("more_members"):
            lines.append(f"    ... and {item['more_members']} more on the group's page")
    if len(items) > MAX_LISTED:
        lines.append(f"... and {len(items) - MAX_LISTED} more")
    return f"[benchsite] {_headline(event, items)}", "\n".join(lines) + "\n"


def _slack_text(text: str) -> str:
    """Slack mrkdwn: &, < and > are control characters (links, mentions)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack(event: str, items: list[dict]) -> dict:
    """A header and a line per item (a group's members below it while the section, at most
    3,000 characters, has room)."""
    headline = _headline(event, items)
    lines = [f"• <{item['url']}|{_slack_text(_line(item)[:SLACK_LINE])}>"
             for item in items[:MAX_LISTED]]
    if len(items) > MAX_LISTED:
        lines.append(f"… and {len(items) - MAX_LISTED} more")
    size = sum(len(line) + 1 for line in lines)
    for number, item in enumerate(items[:MAX_LISTED]):
        members = []
        for member in item.get("members", []):
            line = f"    ◦ <{member['url']}|{_slack_text(_line(member)[:SLACK_LINE])}>"
            if size + len(line) + 1 > SLACK_SECTION:
                break
            members.append(line)
            size += len(line) + 1
        lines[number] += "".join("\n" + line for line in members)
    return {
        "text": headline,
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": headline[:SLACK_HEADER]}},
            {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}},
        ],
    }
