"""Celery tasks: detection after an upload (and again for uploads whose detection task
was lost), and the periodic stopped-reporting check.

Both are idempotent (records are matched with earlier ones, notifications claimed before
they are sent), so at-least-once delivery and retries are safe.
"""

from __future__ import annotations

import logging
import traceback
from datetime import date, timedelta

from celery import shared_task
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError
from django.db.models import F
from django.utils import timezone

from benchsite.regressions import confirmation
from benchsite.regressions.detection import detect_runs
from benchsite.regressions.notify import notify_regressions, notify_silences
from benchsite.regressions.report import nightly_reports
from benchsite.regressions.silence import check_stopped_reporting
from benchsite.results.models import Run, Upload

logger = logging.getLogger(__name__)

RETRY = {"autoretry_for": (OperationalError, InterfaceError), "retry_backoff": True,
         "max_retries": 3, "acks_late": True}


@shared_task(**RETRY)
def detect_upload(upload_id: int) -> int:
    """Re-run detection on the series an upload touched, where its runs are on a default
    branch of their repo; returns the regressions raised.

    Each run counts an attempt on the upload (one that never finishes, its worker killed,
    counts too); a failure records why, and the BENCH_DETECTION_MAX_ATTEMPTS-th gives up:
    the sweeper no longer queues it, and the upload keeps the error for an operator."""
    upload = Upload.objects.filter(pk=upload_id)
    upload.update(detection_attempts=F("detection_attempts") + 1)
    try:
        created = detect_runs(Run.objects.filter(upload_id=upload_id).order_by("timestamp"))
        confirmation.request(created)
        notify_regressions(created)
    except Exception:
        _detection_failed(upload_id, traceback.format_exc())
        raise
    upload.update(detection_owed_at=None, detection_attempts=0, detection_error="")
    return len(created)


def _detection_failed(upload_id: int, error: str) -> None:
    """Record why an upload's detection failed, and give up at the last attempt."""
    error = error.strip()[-4000:]  # the end of a traceback says what failed
    try:
        attempts = Upload.objects.filter(pk=upload_id).values_list(
            "detection_attempts", flat=True).first() or 0
        give_up = attempts >= settings.BENCH_DETECTION_MAX_ATTEMPTS
        Upload.objects.filter(pk=upload_id).update(
            detection_error=error, **({"detection_owed_at": None} if give_up else {}))
    except DatabaseError:  # the database itself failed: the sweeper retries later
        logger.exception("upload %s: detection failed and could not be recorded", upload_id)
        return
    if give_up:
        _tell_given_up(upload_id, attempts, error)
    else:
        logger.warning("upload %s: detection attempt %d of %d failed: %s", upload_id,
                       attempts, settings.BENCH_DETECTION_MAX_ATTEMPTS, _last_line(error))


def _tell_given_up(upload_id: int, attempts: int, error: str) -> None:
    logger.error("upload %s: detection failed %d times, given up (admin: Uploads, detection "
                 "'given up'): %s", upload_id, attempts, _last_line(error))


def _last_line(error: str) -> str:
    return error.splitlines()[-1] if error else ""


@shared_task(**RETRY)
def detect_owed() -> int:
    """For celery beat (settings.CELERY_BEAT_SCHEDULE): queue detection again for uploads
    that still owe it BENCH_DETECTION_RETRY_AFTER s after it was queued (its task was lost:
    broker down or restarted, worker killed; or it failed); returns how many. Uploads whose
    detection already ran BENCH_DETECTION_MAX_ATTEMPTS times without success are given up."""
    now = timezone.now()
    overdue = Upload.objects.filter(
        detection_owed_at__lt=now - timedelta(seconds=settings.BENCH_DETECTION_RETRY_AFTER))
    exhausted = overdue.filter(detection_attempts__gte=settings.BENCH_DETECTION_MAX_ATTEMPTS)
    for upload_id, attempts, error in exhausted.values_list(
            "pk", "detection_attempts", "detection_error")[:1000]:
        error = error or (f"none of its {attempts} detection runs finished (was the worker "
                          "killed each time, e.g. out of memory?)")
        if Upload.objects.filter(pk=upload_id, detection_owed_at__isnull=False).update(
                detection_owed_at=None, detection_error=error):
            _tell_given_up(upload_id, attempts, error)
    owed = list(overdue.filter(detection_attempts__lt=settings.BENCH_DETECTION_MAX_ATTEMPTS)
                .order_by("detection_owed_at").values_list("pk", flat=True)[:1000])
    for upload_id in owed:
        Upload.objects.filter(pk=upload_id).update(detection_owed_at=now)
        try:
            detect_upload.delay(upload_id)
        except Exception:  # the broker is down (or, run inline, the detection failed): the
            # upload still owes it and records why; the other uploads are queued all the same
            logger.exception("upload %s: queueing its detection again failed", upload_id)
    return len(owed)


@shared_task(**RETRY)
def confirmations_overdue() -> int:
    """For celery beat (settings.CELERY_BEAT_SCHEDULE): regressions held for a confirmation
    (or its bisect) past the time limit are told, "unconfirmed"; returns how many."""
    return confirmation.release_overdue()


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
