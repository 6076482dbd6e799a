"""Celery tasks: one task runs one cell and stores its records like an upload; a periodic
sweep ends or re-queues work that would otherwise be stuck.

Delivery is at least once (`acks_late`, re-queued when the worker process dies), so a cell
is claimed with a conditional update and its results are stored in the same transaction
that marks it finished: a re-delivered cell that already finished does nothing, one that
another live worker runs is left to it, and one whose worker died (its heartbeat stopped)
runs again from the start.
"""

from __future__ import annotations

import logging
import os
import traceback
from datetime import timedelta

import orjson
from celery import Task, shared_task
from celery.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from django.conf import settings
from django.db import (
    DatabaseError,
    InterfaceError,
    OperationalError,
    close_old_connections,
    transaction,
)
from django.db.models import Count, F, Q
from django.utils import timezone

from benchsite.jobs.broker import (
    BROKER_ERRORS,
    broker_lost_data,
    forget_reservations,
    stale_reservations,
)
from benchsite.jobs.heartbeat import alive_on, cell_heartbeat, stopped_beating
from benchsite.jobs.models import Job, JobCell
from benchsite.results.ingest import store_upload
from benchsite.results.models import Upload
from runner import families
from runner.contract.status import FAILED, OK, SKIPPED
from runner.engine.run_context import RunContext

logger = logging.getLogger(__name__)
MAX_ATTEMPTS = 3
CELL_STATUS = {OK: JobCell.Status.SUCCEEDED, SKIPPED: JobCell.Status.SKIPPED,
               FAILED: JobCell.Status.FAILED}  # by the runner's outcome status
# This worker process's family state (e.g. baseline timings) and machine, for its latest job.
_job_state: dict[int, tuple] = {}
# A job younger than this is left to the enqueue that follows its submission.
OUTBOX_GRACE = timedelta(seconds=5)


class CellTask(Task):
    """run_cell's class: a cell killed at the hard time limit is failed with that reason
    (Celery calls on_failure in the worker's main process, its pool child being gone)."""

    def on_failure(self, exc, task_id, args, kwargs, einfo):
        if isinstance(exc, TimeLimitExceeded) and args:
            limit = exc.args[0] if exc.args else settings.BENCH_CELL_TIME_LIMIT
            try:
                fail_running(args[0], error=time_limit_reason(limit))
            finally:
                close_old_connections()


def time_limit_reason(limit: float) -> str:
    return f"time limit: killed at the hard time limit of {limit:g} s (BENCH_CELL_TIME_LIMIT)"


@shared_task(
    bind=True,
    base=CellTask,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
    soft_time_limit=settings.BENCH_CELL_SOFT_TIME_LIMIT or None,
    time_limit=settings.BENCH_CELL_TIME_LIMIT,
)
def run_cell(self, cell_id: int) -> str:
    worker = f"{self.request.hostname or 'in-process'} pid {os.getpid()}"
    cell = claim(cell_id, worker=worker)
    if cell is None:
        return "not runnable (finished, cancelled, running elsewhere or given up)"
    try:
        if self.request.is_eager:  # in-process: nothing can die apart from the caller
            execute(cell)
        else:
            with cell_heartbeat(cell.pk, worker):
                execute(cell)
    except SoftTimeLimitExceeded:
        finish(cell, JobCell.Status.FAILED,
               error=f"timed out after {settings.BENCH_CELL_SOFT_TIME_LIMIT} s "
                     "(BENCH_CELL_SOFT_TIME_LIMIT)")
    except (OperationalError, InterfaceError):
        release(cell)
        raise  # transient: retried by Celery, which claims the cell again
    except Exception:
        logger.exception("cell %s failed outside the runner", cell)
        finish(cell, JobCell.Status.FAILED, error=traceback.format_exc())
    return cell.status


def claim(cell_id: int, worker: str) -> JobCell | None:
    """Mark the cell running for this worker; None when it must not run: it ended, or it is
    running on a worker that is alive (a duplicate message)."""
    now = timezone.now()
    runnable = Q(status=JobCell.Status.PENDING) | Q(stale_running(now))
    current = JobCell.objects.filter(
        pk=cell_id, status=JobCell.Status.RUNNING).values_list("worker", flat=True).first()
    if current and died_here(current, worker):
        runnable |= Q(status=JobCell.Status.RUNNING, worker=current)
    with transaction.atomic():
        claimed = JobCell.objects.filter(runnable, pk=cell_id).update(
            status=JobCell.Status.RUNNING, attempts=F("attempts") + 1, worker=worker,
            started_at=now, heartbeat_at=now)
        if not claimed:
            return None
        cell = JobCell.objects.select_related("job").get(pk=cell_id)
        Job.objects.filter(pk=cell.job_id, status=Job.Status.PENDING).update(
            status=Job.Status.RUNNING, started_at=now)
    if cell.attempts > MAX_ATTEMPTS:
        finish(cell, JobCell.Status.FAILED, error=gave_up_reason())
        return None
    return cell


def gave_up_reason() -> str:
    return (f"gave up after {MAX_ATTEMPTS} attempts: each time the worker running it was lost "
            "(crash, out of memory or killed)")


def stale_running(now) -> Q:
    """Running cells whose worker stopped writing the heartbeat."""
    return Q(status=JobCell.Status.RUNNING) & stopped_beating(now)


def died_here(running_on: str, worker: str) -> bool:
    """Whether `running_on` ("node pid N") is this worker node or this very process, and that
    process is gone: a pool child killed mid-cell, or a Celery retry of this process."""
    return running_on == worker or alive_on(running_on, worker.rpartition(" pid ")[0]) is False


def release(cell: JobCell) -> None:
    """Give a claimed cell back (pending) before a Celery retry; the sweeper does it if the
    database cannot be reached now either."""
    try:
        close_old_connections()
        JobCell.objects.filter(pk=cell.pk, status=JobCell.Status.RUNNING,
                               worker=cell.worker).update(status=JobCell.Status.PENDING)
    except DatabaseError:
        logger.warning("cell %s not released for its retry", cell.pk, exc_info=True)


def execute(cell: JobCell) -> None:
    """Run the cell with the runner and store its records through the upload path."""
    job = cell.job
    if job.pk not in _job_state:
        _job_state.clear()
        _job_state[job.pk] = ({}, RunContext.collect())
    state, context = _job_state[job.pk]
    outcome = families.get(job.family).run(cell.cell, job.timing, state, context, cell.files)
    with transaction.atomic():
        stored = store_upload(
            orjson.dumps(outcome.records),
            metadata=job.run_metadata(),
            source=Upload.Source.WORKER,
            idempotency_key=f"job-{job.pk}-cell-{cell.pk}",
        )
        finish(cell, CELL_STATUS[outcome.status], error=outcome.error, upload=stored.upload,
               measured_s=outcome.measured_s, unstable=outcome.unstable)


def finish(cell: JobCell, status: str, *, error: str = "", upload: Upload | None = None,
           measured_s: float | None = None, unstable: bool = False) -> None:
    """Record the cell's end and count it; the last cell to end closes the job."""
    with transaction.atomic():
        ended = JobCell.objects.filter(pk=cell.pk, status=JobCell.Status.RUNNING).update(
            status=status, error=error, upload=upload, measured_s=measured_s,
            unstable=unstable, finished_at=timezone.now())
        if not ended:
            return
        cell.status = status
        Job.objects.filter(pk=cell.job_id).update(cells_done=F("cells_done") + 1)
        close_if_done(cell.job_id)


def fail_running(cell_id: int, error: str) -> None:
    """Fail a cell that is still running (its worker cannot finish it)."""
    cell = JobCell.objects.filter(pk=cell_id).first()
    if cell is not None:
        finish(cell, JobCell.Status.FAILED, error=error)


def close_if_done(job_id: int) -> None:
    job = Job.objects.select_for_update().get(pk=job_id)
    if job.ended or job.cells_done < job.cells_total:
        return
    counts = dict(job.cells.values_list("status").annotate(n=Count("id")))
    failed = counts.get(JobCell.Status.FAILED, 0)
    if failed == job.cells_total:
        job.status = Job.Status.FAILED
    elif failed:
        job.status = Job.Status.PARTIALLY_FAILED
    else:
        job.status = Job.Status.SUCCEEDED
    job.finished_at = timezone.now()
    job.save(update_fields=["status", "finished_at"])


def cancel(job: Job) -> int:
    """Cancel the job's pending cells (running cells finish); returns how many."""
    with transaction.atomic():
        cancelled = job.cells.filter(status=JobCell.Status.PENDING).update(
            status=JobCell.Status.CANCELLED, finished_at=timezone.now())
        Job.objects.filter(pk=job.pk).exclude(status__in=Job.ENDED).update(
            status=Job.Status.CANCELLED, finished_at=timezone.now(),
            cells_done=F("cells_done") + cancelled)
    job.refresh_from_db()
    return cancelled


def fail_pending(job: Job, error: str) -> int:
    """Fail the job's pending cells with `error` (it ends when its running ones do)."""
    with transaction.atomic():
        failed = job.cells.filter(status=JobCell.Status.PENDING).update(
            status=JobCell.Status.FAILED, error=error, finished_at=timezone.now())
        Job.objects.filter(pk=job.pk).update(cells_done=F("cells_done") + failed)
        close_if_done(job.pk)
    return failed


def enqueue(job: Job) -> bool:
    """Send one task per pending cell of the job to its queue and mark the job queued (the
    outbox: `Job.enqueued_at`). When the broker cannot take them, say so in the log and
    return False: the job stays recorded and the sweeper queues it once the broker is back.
    A cell sent twice still runs once (claim)."""
    try:
        for cell_id in job.cells.filter(status=JobCell.Status.PENDING).values_list(
                "id", flat=True):
            run_cell.apply_async(args=[cell_id], queue=job.queue)
    except BROKER_ERRORS as error:
        logger.warning("job %s not queued, the broker is unreachable (the sweeper will queue "
                       "it): %s", job.pk, error)
        Job.objects.filter(pk=job.pk).update(enqueued_at=None)
        return False
    Job.objects.filter(pk=job.pk).update(enqueued_at=timezone.now())
    return True


@shared_task(acks_late=False)  # a lost sweep is simply the next one
def sweep() -> dict[str, int]:
    """For celery beat (settings.CELERY_BEAT_SCHEDULE, every BENCH_SWEEP_INTERVAL s): end or
    re-queue the work that would otherwise be stuck. Returns what it did, by kind."""
    done = sweep_orphaned_cells()
    done["jobs queued from the outbox"], done["jobs failed unqueued"] = sweep_outbox()
    done["jobs queued after broker data loss"] = requeue_after_broker_loss()
    done["cells queued again, taken by a lost worker"] = requeue_lost_reservations()
    return done


def sweep_orphaned_cells() -> dict[str, int]:
    """Running cells whose heartbeat stopped: past the hard time limit, failed with that
    reason; after MAX_ATTEMPTS lost workers, failed; else pending again and re-queued."""
    done = {"cells failed at the time limit": 0, "cells failed after lost workers": 0,
            "cells queued again": 0}
    now = timezone.now()
    limit = timedelta(seconds=settings.BENCH_CELL_TIME_LIMIT - settings.BENCH_HEARTBEAT_INTERVAL)
    for cell in JobCell.objects.filter(stale_running(now)).select_related("job"):
        last_seen = cell.heartbeat_at or cell.started_at
        if cell.started_at and last_seen - cell.started_at >= limit:
            fail_running(cell.pk, error=time_limit_reason(settings.BENCH_CELL_TIME_LIMIT))
            done["cells failed at the time limit"] += 1
        elif cell.attempts >= MAX_ATTEMPTS:
            fail_running(cell.pk, error=gave_up_reason())
            done["cells failed after lost workers"] += 1
        elif JobCell.objects.filter(pk=cell.pk, status=JobCell.Status.RUNNING,
                                    worker=cell.worker, heartbeat_at=cell.heartbeat_at).update(
                status=JobCell.Status.PENDING,
                error=f"attempt {cell.attempts}: worker {cell.worker} lost (no heartbeat "
                      f"since {last_seen:%Y-%m-%d %H:%M:%S} UTC); queued again"):
            done["cells queued again"] += 1
            try:
                run_cell.apply_async(args=[cell.pk], queue=cell.job.queue)
            except BROKER_ERRORS:
                # Pending without a message: the outbox's to queue.
                Job.objects.filter(pk=cell.job_id).update(enqueued_at=None)
    return done


def sweep_outbox() -> tuple[int, int]:
    """Jobs whose enqueue failed: queued now, or, when none of their cells ever ran,
    failed with the reason once they waited BENCH_ENQUEUE_GIVE_UP s. Returns (queued,
    failed)."""
    now = timezone.now()
    queued = failed = 0
    unqueued = Job.objects.filter(enqueued_at__isnull=True, created_at__lt=now - OUTBOX_GRACE)
    for job in unqueued.exclude(status__in=Job.ENDED):
        give_up = now - timedelta(seconds=settings.BENCH_ENQUEUE_GIVE_UP)
        if job.started_at is None and job.created_at < give_up:
            fail_pending(job, error=f"never queued: the broker could not take the job's tasks "
                                    f"for {settings.BENCH_ENQUEUE_GIVE_UP} s "
                                    "(BENCH_ENQUEUE_GIVE_UP)")
            Job.objects.filter(pk=job.pk).update(enqueued_at=now)
            failed += 1
        elif enqueue(job):
            queued += 1
        else:
            break  # the broker is still down
    return queued, failed


def requeue_lost_reservations() -> int:
    """Pending cells whose message a worker took and never acknowledged, for longer than the
    heartbeat timeout: that worker died before it claimed them (the broker would give the
    message back only after the visibility timeout). Sent again; returns how many."""
    reserved = {args[0]: tag for tag, args in stale_reservations(
        run_cell.name, settings.BENCH_HEARTBEAT_TIMEOUT) if args and isinstance(args[0], int)}
    cells = JobCell.objects.filter(pk__in=reserved, status=JobCell.Status.PENDING).exclude(
        job__status__in=Job.ENDED).select_related("job")
    sent = []
    for cell in cells:
        try:
            run_cell.apply_async(args=[cell.pk], queue=cell.job.queue)
        except BROKER_ERRORS:
            break  # the broker went away meanwhile: the next sweep finds them again
        sent.append(reserved[cell.pk])
    forget_reservations(sent)
    return len(sent)


def requeue_after_broker_loss() -> int:
    """When the broker lost its data (restart without persistence), every unended job's
    pending cells are sent again; returns how many jobs."""
    if not broker_lost_data():
        return 0
    jobs = Job.objects.exclude(status__in=Job.ENDED).filter(
        enqueued_at__isnull=False, cells__status=JobCell.Status.PENDING).distinct()
    return sum(enqueue(job) for job in jobs)
