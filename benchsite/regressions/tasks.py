"""Celery tasks: detection after an upload (and again for uploads whose detection task
was lost), and the periodic stopped-reporting check.

Both are idempotent (records are matched with earlier ones, notifications claimed before
they are sent), so at-least-once delivery and retries are safe.
"""

from __future__ import annotations

from datetime import date, timedelta

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from benchsite.regressions.detection import detect_runs
from benchsite.regressions.notify import notify_regressions, notify_silences
from benchsite.regressions.report import nightly_reports
from benchsite.regressions.silence import check_stopped_reporting
from benchsite.results.models import Run, Upload

RETRY = {"autoretry_for": (OperationalError, InterfaceError), "retry_backoff": True,
         "max_retries": 3, "acks_late": True}


@shared_task(**RETRY)
def detect_upload(upload_id: int) -> int:
    """Re-run detection on the series an upload touched, where its runs are on a default
    branch of their repo; returns the regressions raised."""
    created = detect_runs(Run.objects.filter(upload_id=upload_id).order_by("timestamp"))
    notify_regressions(created)
    Upload.objects.filter(pk=upload_id).update(detection_owed_at=None)
    return len(created)


@shared_task(**RETRY)
def detect_owed() -> int:
    """For celery beat (settings.CELERY_BEAT_SCHEDULE): queue detection again for uploads
    that still owe it BENCH_DETECTION_RETRY_AFTER s after it was queued (its task was lost:
    broker down or restarted, worker killed); returns how many."""
    now = timezone.now()
    owed = list(Upload.objects.filter(
        detection_owed_at__lt=now - timedelta(seconds=settings.BENCH_DETECTION_RETRY_AFTER)
    ).order_by("detection_owed_at").values_list("pk", flat=True)[:1000])
    for upload_id in owed:
        Upload.objects.filter(pk=upload_id).update(detection_owed_at=now)
        detect_upload.delay(upload_id)
    return len(owed)


@shared_task(**RETRY)
def stopped_reporting() -> int:
    """For django-celery-beat (a schedule is made by a migration); returns new alerts."""
    alerts = check_stopped_reporting()
    notify_silences(alerts)
    return len(alerts)


@shared_task(**RETRY)
def nightly_report(day: str | None = None) -> int:
    """For django-celery-beat (a schedule is made by a migration): the nightly reports of
    `day` (YYYY-MM-DD; default yesterday, UTC), each notified once; returns how many."""
    return len(nightly_reports(date.fromisoformat(day) if day else None))
