"""The Celery task that runs a bisect or try job on one worker, start to end, and the
periodic sweep that queues again (or fails, with the reason) the bisects nothing runs.

Delivery is at least once (`acks_late`, re-queued when the worker process dies): the bisect
is claimed with a conditional update (pending, or running on a worker whose heartbeat
stopped or whose process is gone), and the search replays the rounds already stored, so a
re-delivered bisect measures only what is missing and stores nothing twice. A task sent
twice therefore runs the bisect once, which lets the sweeper send again whenever a bisect
may have lost its message.
"""

from __future__ import annotations

import logging
import os
import socket
import traceback
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from benchsite.bisects import execute
from benchsite.bisects.models import Bisect
from benchsite.jobs.broker import BROKER_ERRORS
from benchsite.jobs.heartbeat import Heartbeat, alive_on, stopped_beating
from benchsite.jobs.tasks import MAX_ATTEMPTS, OUTBOX_GRACE, died_here

logger = logging.getLogger(__name__)
# A pending bisect is left OUTBOX_GRACE to the enqueue that follows its start, and fails after
# MAX_ATTEMPTS lost workers, as cells do; one whose task was handed to the broker RESEND_AFTER
# ago and that no worker took is sent again (the message may be lost: a broker that lost its
# data, a worker that died before claiming it).
RESEND_AFTER = timedelta(hours=1)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True,
             time_limit=settings.BENCH_BISECT_TIME_LIMIT)
def run_bisect(self, bisect_id: int) -> str:
    worker = in_process() if self.request.is_eager else \
        f"{self.request.hostname} pid {os.getpid()}"
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


def in_process() -> str:
    """The worker name of a bisect run in this process (no broker: the command or request
    that started it runs it, and writes no heartbeat)."""
    return f"in-process@{socket.gethostname()} pid {os.getpid()}"


def runs_here(worker: str) -> bool:
    """Whether `worker` is a live process of this machine running a bisect in-process: the
    sweeper (beat beside a `bench bisect` run without a broker) leaves it alone."""
    return alive_on(worker, in_process().rpartition(" pid ")[0]) is True


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
    if not claimed:
        return None
    bisect = Bisect.objects.select_related("source", "head_source", "regression").get(
        pk=bisect_id)
    if bisect.attempts > MAX_ATTEMPTS:  # delivered again by the broker after lost workers
        fail(bisect, gave_up_reason(bisect))
        return None
    return bisect


def enqueue(bisect: Bisect) -> bool:
    """Send its task to its queue (`enqueued_at`: when); when the broker cannot take it, say
    so on the bisect and leave `enqueued_at` empty: the sweeper sends it once the broker is
    back."""
    Bisect.objects.filter(pk=bisect.pk).update(enqueued_at=timezone.now())
    try:
        run_bisect.apply_async(args=[bisect.pk], queue=bisect.queue)
    except BROKER_ERRORS as error:
        logger.warning("bisect %s not queued: %s", bisect.pk, error)
        Bisect.objects.filter(pk=bisect.pk, state=Bisect.State.PENDING).update(
            enqueued_at=None, progress=f"not queued: the broker is unreachable ({error}); "
                                       "the sweeper queues it when the broker is back"[:500])
        return False
    return True


def fail(bisect: Bisect, reason: str, **still) -> bool:
    """End a bisect nothing can finish as failed, with the reason; `still`: the fields it
    must still have (a conditional update: a worker that came back wins)."""
    return bool(Bisect.objects.filter(pk=bisect.pk, state=bisect.state, **still).update(
        state=Bisect.State.FAILED, progress="", finished_at=timezone.now(),
        outcome={**(bisect.outcome or {}), "message": reason}))


def gave_up_reason(bisect: Bisect) -> str:
    return (f"gave up after {MAX_ATTEMPTS} attempts: each time the worker running it was lost "
            f"(crash, out of memory or killed; the last: {bisect.worker or 'unknown'})")


def stale_running(now) -> Q:
    """Running bisects whose worker stopped writing the heartbeat."""
    return Q(state=Bisect.State.RUNNING) & stopped_beating(now)


@shared_task(acks_late=False)  # a lost sweep is simply the next one
def sweep() -> dict[str, int]:
    """For celery beat (settings.CELERY_BEAT_SCHEDULE, every BENCH_SWEEP_INTERVAL s): queue
    again, or fail with the reason, the bisects that would otherwise stay running or pending
    forever. Returns what it did, by kind."""
    done = sweep_lost_workers()
    done.update(sweep_pending())
    return done


def sweep_lost_workers() -> dict[str, int]:
    """Running bisects whose heartbeat stopped (their worker died, or its machine; not one
    run in-process by a live process of this machine): past the time limit, failed with that
    reason; after MAX_ATTEMPTS lost workers, failed; else
    pending again and queued (the rounds already stored are replayed, not measured)."""
    done = {"bisects failed at the time limit": 0, "bisects failed after lost workers": 0,
            "bisects queued again, their worker lost": 0}
    now = timezone.now()
    limit = timedelta(seconds=settings.BENCH_BISECT_TIME_LIMIT - settings.BENCH_HEARTBEAT_INTERVAL)
    for bisect in Bisect.objects.filter(stale_running(now)):
        if runs_here(bisect.worker):
            continue  # in-process, without a heartbeat, in a process still alive
        last_seen = bisect.heartbeat_at or bisect.started_at
        still = {"worker": bisect.worker, "heartbeat_at": bisect.heartbeat_at}
        if bisect.started_at and last_seen - bisect.started_at >= limit:
            if fail(bisect, f"time limit: killed at the hard time limit of "
                            f"{settings.BENCH_BISECT_TIME_LIMIT} s (BENCH_BISECT_TIME_LIMIT) "
                            f"on {bisect.worker}", **still):
                done["bisects failed at the time limit"] += 1
        elif bisect.attempts >= MAX_ATTEMPTS:
            if fail(bisect, gave_up_reason(bisect), **still):
                done["bisects failed after lost workers"] += 1
        elif Bisect.objects.filter(pk=bisect.pk, state=Bisect.State.RUNNING, **still).update(
                state=Bisect.State.PENDING, enqueued_at=None,
                progress=f"attempt {bisect.attempts}: worker {bisect.worker} lost (no heartbeat "
                         f"since {last_seen:%Y-%m-%d %H:%M:%S} UTC); queued again"[:500]):
            done["bisects queued again, their worker lost"] += 1
            enqueue(bisect)
    return done


def sweep_pending() -> dict[str, int]:
    """Pending bisects: those whose task the broker could not take (or whose enqueue never
    ran) are sent now, those sent RESEND_AFTER ago and still not taken are sent again; one
    pending BENCH_ENQUEUE_GIVE_UP s since it was started or last ran is failed, saying why."""
    done = {"bisects queued from the outbox": 0, "bisects queued again, not taken": 0,
            "bisects failed, never taken": 0}
    now = timezone.now()
    pending = Bisect.objects.filter(state=Bisect.State.PENDING, created_at__lt=now - OUTBOX_GRACE)
    give_up = now - timedelta(seconds=settings.BENCH_ENQUEUE_GIVE_UP)
    waited = pending.alias(since=Coalesce("heartbeat_at", "started_at", "created_at"))
    for bisect in waited.filter(since__lt=give_up):
        where = ("the broker could not take its task" if bisect.enqueued_at is None else
                 f"no worker of queue {bisect.queue!r} took its task")
        if fail(bisect, f"never ran: {where} for {settings.BENCH_ENQUEUE_GIVE_UP} s "
                        "(BENCH_ENQUEUE_GIVE_UP)", enqueued_at=bisect.enqueued_at):
            done["bisects failed, never taken"] += 1
    for kind, bisects in (("bisects queued from the outbox", pending.filter(
            enqueued_at__isnull=True)), ("bisects queued again, not taken", pending.filter(
            enqueued_at__lt=now - RESEND_AFTER))):
        for bisect in bisects.order_by("created_at"):
            if not enqueue(bisect):
                return done  # the broker is down: the next sweep tries again
            done[kind] += 1
    return done
