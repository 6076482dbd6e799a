"""Notifications of new regressions and stopped-reporting alerts: webhooks (generic JSON or
Slack-compatible) and email.

All outbound HTTP goes through `post_json`, the one place tests replace or observe. A
failing target is logged and does not keep the others from being told. Each regression and
alert is claimed (`notified_at` set where it was empty) before it is sent, so a retried
task never notifies twice.

Generic webhook payload (JSON, POST):

    {"event": "regressions",            # or "stopped_reporting"
     "count": 2,
     "items": [{"id": 7, "url": "https://bench.example/regressions/7/",
                "repo": "pytorch/ao", "benchmark": "...", "model": "...", "metric": "...",
                "mode": "...", "dtype": "...", "backend": "...", "device": "...",
                "arch": "...", "detector": "changepoint", "kind": "regression",
                "direction": "lower", "baseline": 1.23, "value": 1.38,
                "magnitude": 0.12, "confidence": 1e-07,
                "last_good_sha": "...", "first_bad_sha": "...",
                "first_bad_at": "2025-11-07T03:00:00+00:00"}]}

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
from django.db.models import Model
from django.urls import reverse
from django.utils import timezone

from benchsite.regressions.models import NotificationTarget, Regression, SilenceAlert

logger = logging.getLogger(__name__)
TIMEOUT_S = 10
MAX_LISTED = 15  # items spelled out in one Slack message or email
SLACK_LINE = 150


def post_json(url: str, payload: dict) -> int:
    """POST `payload` as JSON; returns the HTTP status. Raises OSError (URLError) on
    failure."""
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "benchsite-alerts"})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        return response.status


def notify_regressions(regressions: Sequence[Regression]) -> int:
    """Tell every matching target about the regressions not yet notified (improvements and
    HUD "suspicious" findings are shown on the site only); returns how many were sent."""
    wanted = [r for r in regressions if r.kind in Regression.NOTIFIED_KINDS]
    claimed = _claim(Regression, wanted)
    if claimed:
        _send(claimed, "regressions", lambda r: (r.series.repo, r.series.benchmark),
              _regression_item)
    return len(claimed)


def notify_silences(alerts: Sequence[SilenceAlert]) -> int:
    claimed = _claim(SilenceAlert, list(alerts))
    if claimed:
        _send(claimed, "stopped_reporting",
              lambda a: (a.repo, a.series.benchmark if a.series_id else ""), _silence_item)
    return len(claimed)


def _claim(model: type[Model], items: list) -> list:
    """The items this call may notify: those whose `notified_at` it set."""
    claimed = []
    for item in items:
        if model.objects.filter(pk=item.pk, notified_at__isnull=True).update(
                notified_at=timezone.now()):
            claimed.append(item)
    return claimed


def _send(items: list, event: str, where, describe) -> None:
    for target in NotificationTarget.objects.filter(enabled=True):
        mine = [item for item in items if target.matches(*where(item))]
        if not mine:
            continue
        described = [describe(item) for item in mine]
        try:
            if target.kind == NotificationTarget.Kind.EMAIL:
                subject, body = _email(event, described)
                send_mail(subject, body, None, [target.email])
            elif target.kind == NotificationTarget.Kind.SLACK:
                post_json(target.url, _slack(event, described))
            else:
                post_json(target.url, {"event": event, "count": len(described),
                                       "items": described})
        except (OSError, ValueError) as error:  # URLError, SMTP errors, bad URLs
            logger.warning("notification to %s failed: %s", target, error)


def _url(path: str) -> str:
    return settings.BENCH_SITE_URL.rstrip("/") + path


def _regression_item(regression: Regression) -> dict:
    series = regression.series
    return {
        "id": regression.pk, "url": _url(regression.get_absolute_url()),
        "repo": series.repo, "benchmark": series.benchmark, "model": series.model,
        "metric": series.metric, "mode": series.mode, "dtype": series.dtype,
        "backend": series.backend, "device": series.device, "arch": series.arch,
        "detector": regression.detector, "kind": regression.kind,
        "direction": regression.direction or None, "baseline": regression.baseline,
        "value": regression.value, "magnitude": regression.magnitude,
        "confidence": regression.confidence, "last_good_sha": regression.last_good_sha,
        "first_bad_sha": regression.first_bad_sha,
        "first_bad_at": regression.first_bad_at.isoformat(),
    }


def _silence_item(alert: SilenceAlert) -> dict:
    return {
        "id": alert.pk, "url": _url(reverse("regressions:list")), "repo": alert.repo,
        "device": alert.device, "arch": alert.arch,
        "series": str(alert.series) if alert.series_id else None,
        "last_seen": alert.last_seen.isoformat(),
        "usual_gap_hours": round(alert.usual_gap.total_seconds() / 3600, 2),
    }


def _line(item: dict) -> str:
    """One item as plain text."""
    if "magnitude" in item:
        what = " / ".join(item[key] for key in ("benchmark", "model", "metric", "arch") if
                          item[key])
        return (f"{item['kind']} {item['magnitude']:+.1%} in {what} ({item['repo']}) "
                f"between {item['last_good_sha'][:10] or '?'} and {item['first_bad_sha'][:10]}"
                f" [{item['detector']}]")
    subject = item["series"] or item["arch"] or item["device"]
    return (f"{subject} ({item['repo']}) silent since {item['last_seen']} "
            f"(usually every {item['usual_gap_hours']} h)")


def _headline(event: str, count: int) -> str:
    if event == "regressions":
        return f"{count} new regression{'s' if count != 1 else ''} detected"
    return f"{count} device{'s' if count != 1 else ''} or series stopped reporting"


def _email(event: str, items: list[dict]) -> tuple[str, str]:
    lines = [f"- {_line(item)}\n  {item['url']}" for item in items[:MAX_LISTED]]
    if len(items) > MAX_LISTED:
        lines.append(f"... and {len(items) - MAX_LISTED} more")
    return f"[benchsite] {_headline(event, len(items))}", "\n".join(lines) + "\n"


def _slack_text(text: str) -> str:
    """Slack mrkdwn: &, < and > are control characters (links, mentions)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack(event: str, items: list[dict]) -> dict:
    headline = _headline(event, len(items))
    # A section holds at most 3,000 characters.
    lines = [f"• <{item['url']}|{_slack_text(_line(item)[:SLACK_LINE])}>"
             for item in items[:MAX_LISTED]]
    if len(items) > MAX_LISTED:
        lines.append(f"… and {len(items) - MAX_LISTED} more")
    return {
        "text": headline,
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": headline}},
            {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}},
        ],
    }
