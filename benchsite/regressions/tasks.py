"""Celery tasks: detection after an upload, and the periodic stopped-reporting check.

Both are idempotent (records are matched with earlier ones, notifications claimed before
they are sent), so at-least-once delivery and retries are safe.
"""

from __future__ import annotations

from datetime import date

from celery import shared_task
from django.db import InterfaceError, OperationalError

from benchsite.regressions.detection import detect_runs
from benchsite.regressions.notify import notify_regressions, notify_silences
from benchsite.regressions.report import nightly_reports
from benchsite.regressions.silence import check_stopped_reporting
from benchsite.results.models import Run

RETRY = {"autoretry_for": (OperationalError, InterfaceError), "retry_backoff": True,
         "max_retries": 3, "acks_late": True}


@shared_task(**RETRY)
def detect_upload(upload_id: int) -> int:
    """Re-run detection on the series an upload touched, where its runs are on a default
    branch of their repo; returns the regressions raised."""
    created = detect_runs(Run.objects.filter(upload_id=upload_id).order_by("timestamp"))
    notify_regressions(created)
    return len(created)


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
