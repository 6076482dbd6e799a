"""Telling a regression's notification targets the culprit a bisect found, once.

Through the same outbound path as the regressions' alerts (`regressions.notify.post_json`,
Django's email). Generic webhook payload:

    {"event": "culprit", "count": 1,
     "items": [{"type": "culprit", "bisect": 4, "url": "https://bench.example/bisects/4/",
                "regression": 7, "regression_url": "https://bench.example/regressions/7/",
                "repo": "pytorch/ao", "benchmark": "...", "metric": "...",
                "sha": "...", "subject": "...", "author": "Name <mail>",
                "commit_url": "https://github.com/pytorch/ao/commit/...",
                "magnitude": 0.31, "p_value": 0.002}]}
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from benchsite.bisects.models import Bisect
from benchsite.regressions import notify as alerts
from benchsite.regressions.models import NotificationTarget

logger = logging.getLogger(__name__)


def tell_culprit(bisect: Bisect) -> bool:
    """Send the culprit of a bisect started from a regression to the targets matching the
    regression's repo and benchmark; False when there is nothing to tell or it was told."""
    if not (bisect.regression_id and bisect.culprit_sha):
        return False
    if not Bisect.objects.filter(pk=bisect.pk, notified_at__isnull=True).update(
            notified_at=timezone.now()):
        return False
    regression = bisect.regression
    series = regression.series
    culprit = bisect.outcome["culprit"]
    item = {"type": "culprit", "bisect": bisect.pk, "url": _url(bisect.get_absolute_url()),
            "regression": regression.pk, "regression_url": _url(regression.get_absolute_url()),
            "repo": series.repo, "benchmark": series.benchmark, "metric": series.metric,
            "sha": culprit["sha"], "subject": culprit["subject"], "author": culprit["author"],
            "commit_url": culprit["url"] or None, "magnitude": culprit["magnitude"],
            "p_value": culprit["p_value"]}
    line = (f"Bisect {bisect.pk} found the culprit of regression {regression.pk} "
            f"({series.benchmark} / {series.model} / {series.metric}, {series.repo}): "
            f"{culprit['sha'][:12]} \"{culprit['subject']}\" by {culprit['author']}, "
            f"{culprit['magnitude']:+.1%}")
    for target in NotificationTarget.objects.filter(enabled=True):
        if not target.matches(series.repo, series.benchmark):
            continue
        try:
            if target.kind == NotificationTarget.Kind.EMAIL:
                send_mail(f"[benchsite] culprit of regression {regression.pk}: "
                          f"{culprit['sha'][:12]}", f"{line}\n{item['url']}\n", None,
                          [target.email])
            elif target.kind == NotificationTarget.Kind.SLACK:
                alerts.post_json(target.url, {"text": line, "blocks": [{"type": "section", "text": {
                    "type": "mrkdwn", "text": f"<{item['url']}|{_slack(line)}>"}}]})
            else:
                alerts.post_json(target.url, {"event": "culprit", "count": 1, "items": [item]})
        except (OSError, ValueError) as error:  # URLError, SMTP errors, bad URLs
            logger.warning("culprit notification to %s failed: %s", target, error)
    return True


def _url(path: str) -> str:
    return settings.BENCH_SITE_URL.rstrip("/") + path


def _slack(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
