"""The Celery task that runs a bisect or try job on one worker, start to end.

Delivery is at least once (`acks_late`, re-queued when the worker process dies): the bisect
is claimed with a conditional update (pending, or running on a worker whose heartbeat
stopped or whose process is gone), and the search replays the rounds already stored, so a
re-delivered bisect measures only what is missing and stores nothing twice.
"""

from __future__ import annotations

import logging
import os
import traceback
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from benchsite.bisects import execute
from benchsite.bisects.models import Bisect
from benchsite.jobs.heartbeat import Heartbeat
from benchsite.jobs.tasks import died_here

logger = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True,
             time_limit=settings.BENCH_BISECT_TIME_LIMIT)
def run_bisect(self, bisect_id: int) -> str:
    worker = f"{self.request.hostname or 'in-process'} pid {os.getpid()}"
    bisect = claim(bisect_id, worker)
    if bisect is None:
        return "not runnable (ended, or running on a live worker)"
    try:
        if self.request.is_eager:
            execute.run(bisect)
        else:
            with Heartbeat(Bisect.objects.filter(pk=bisect.pk, worker=worker,
                                                 state=Bisect.State.RUNNING),
                           f"bisect {bisect.pk}"):
                execute.run(bisect)
    except Exception:
        logger.exception("bisect %s failed", bisect_id)
        Bisect.objects.filter(pk=bisect_id, state=Bisect.State.RUNNING).update(
            state=Bisect.State.FAILED, finished_at=timezone.now(), progress="",
            outcome={"message": f"the bisect itself failed:\n{traceback.format_exc()[-4000:]}"})
    return Bisect.objects.get(pk=bisect_id).state


def claim(bisect_id: int, worker: str) -> Bisect | None:
    """Mark it running for this worker; None when it must not run here."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.BENCH_HEARTBEAT_TIMEOUT)
    runnable = Q(state=Bisect.State.PENDING) | Q(state=Bisect.State.RUNNING) & (
        Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True, started_at__lt=stale))
    current = Bisect.objects.filter(pk=bisect_id, state=Bisect.State.RUNNING).values_list(
        "worker", flat=True).first()
    if current and died_here(current, worker):
        runnable |= Q(state=Bisect.State.RUNNING, worker=current)
    claimed = Bisect.objects.filter(runnable, pk=bisect_id).update(
        state=Bisect.State.RUNNING, worker=worker, attempts=F("attempts") + 1,
        started_at=now, heartbeat_at=now)
    return Bisect.objects.select_related("source", "head_source", "regression").get(
        pk=bisect_id) if claimed else None
