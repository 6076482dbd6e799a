"""The embedded default (scripts/run): a real worker on kombu's filesystem broker runs the
jobs, so submitting one returns as soon as it is queued."""

import os
import time

import pytest
from django.core.management import call_command

from benchsite.jobs.models import Job
from tests.jobs.conftest import FAST_OPTIONS, FAST_TIMING, SMALL_SPEC, wait_for

pytestmark = [pytest.mark.torch, pytest.mark.django_db(transaction=True)]


def test_bench_run_returns_once_queued_and_the_worker_runs_the_job(filesystem_worker, tmp_path,
                                                                    capsys):
    spec = tmp_path / "small.yml"
    spec.write_text(SMALL_SPEC)
    started = time.monotonic()
    call_command("bench", "run", str(spec), "--queue", "cpu", *FAST_OPTIONS)
    returned_after = time.monotonic() - started
    job = Job.objects.get()
    assert job.enqueued_at is not None and job.cells_done < job.cells_total
    assert returned_after < 5, returned_after  # queued, not run here (a cell imports torch)
    assert f"job {job.pk}: 4 cells on queue 'cpu'" in capsys.readouterr().out

    def ended():
        """the worker to finish the job"""
        job.refresh_from_db()
        return job.ended

    wait_for(ended)
    assert job.status == "succeeded" and job.cells_done == 4
    assert {cell.worker.split("@")[0] for cell in job.cells.all()} == {
        f"fs{os.getpid()}"}


def test_the_api_answers_queued_with_the_job_pending(filesystem_worker, api, make_token):
    response = api.post("/api/v3/jobs", {"spec": SMALL_SPEC, "queue": "cpu", "timing": FAST_TIMING},
                        format="json",
                        HTTP_AUTHORIZATION=f"Bearer {make_token('pytorch/ao')}")
    assert response.status_code == 201, response.json()
    shown = response.json()
    assert shown["status"] == "pending" and shown["enqueued_at"] and shown["cells_done"] == 0
    job = wait_for(lambda: Job.objects.filter(pk=shown["id"], status="succeeded").first())
    assert job.cells_done == 4
