"""Celery tasks: one task runs one cell and stores its records like an upload.

Delivery is at least once (`acks_late`, re-queued when the worker process dies), so a cell
is claimed with a conditional update and its results are stored in the same transaction
that marks it finished: a re-delivered cell that already finished does nothing, and one
whose worker died midway runs again from the start.
"""

from __future__ import annotations

import logging
import os
import traceback

import orjson
from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import Count, F
from django.utils import timezone

from benchsite.jobs.models import Job, JobCell
from benchsite.results.ingest import store_upload
from benchsite.results.models import Upload
from runner import families
from runner.contract.status import FAILED, OK, SKIPPED
from runner.environment import RunContext

logger = logging.getLogger(__name__)
MAX_ATTEMPTS = 3
CELL_STATUS = {OK: JobCell.Status.SUCCEEDED, SKIPPED: JobCell.Status.SKIPPED,
               FAILED: JobCell.Status.FAILED}  # by the runner's outcome status
# This worker process's family state (e.g. baseline timings) and machine, for its latest job.
_job_state: dict[int, tuple] = {}


@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
    soft_time_limit=settings.BENCH_CELL_SOFT_TIME_LIMIT,
    time_limit=settings.BENCH_CELL_TIME_LIMIT,
)
def run_cell(self, cell_id: int) -> str:
    cell = claim(cell_id, worker=f"{self.request.hostname or 'in-process'} pid {os.getpid()}")
    if cell is None:
        return "not runnable (finished, cancelled or given up)"
    try:
        execute(cell)
    except SoftTimeLimitExceeded:
        finish(cell, JobCell.Status.FAILED,
               error=f"timed out after {settings.BENCH_CELL_SOFT_TIME_LIMIT} s "
                     "(BENCH_CELL_SOFT_TIME_LIMIT)")
    except (OperationalError, InterfaceError):
        raise  # transient: retried by Celery; the cell stays claimed for the retry
    except Exception:
        logger.exception("cell %s failed outside the runner", cell)
        finish(cell, JobCell.Status.FAILED, error=traceback.format_exc())
    return cell.status


def claim(cell_id: int, worker: str) -> JobCell | None:
    """Mark the cell running for this worker; None when it must not run."""
    now = timezone.now()
    with transaction.atomic():
        claimed = JobCell.objects.filter(
            pk=cell_id, status__in=[JobCell.Status.PENDING, JobCell.Status.RUNNING]
        ).update(status=JobCell.Status.RUNNING, attempts=F("attempts") + 1, worker=worker,
                 started_at=now)
        if not claimed:
            return None
        cell = JobCell.objects.select_related("job").get(pk=cell_id)
        Job.objects.filter(pk=cell.job_id, status=Job.Status.PENDING).update(
            status=Job.Status.RUNNING, started_at=now)
    if cell.attempts > MAX_ATTEMPTS:
        finish(cell, JobCell.Status.FAILED,
               error=f"gave up after {MAX_ATTEMPTS} attempts: each time the worker running it "
                     "was lost (crash, out of memory or hard time limit)")
        return None
    return cell


def execute(cell: JobCell) -> None:
    """Run the cell with the runner and store its records through the upload path."""
    job = cell.job
    if job.pk not in _job_state:
        _job_state.clear()
        _job_state[job.pk] = ({}, RunContext.collect())
    state, context = _job_state[job.pk]
    outcome = families.get(job.family).run(cell.cell, job.timing, state, context)
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

