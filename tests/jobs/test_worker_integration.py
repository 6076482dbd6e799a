"""A real `celery worker` process against Redis and PostgreSQL runs submitted jobs."""

import os
import signal

import pytest
from django.core.management import call_command
from django.db.models import Count

from benchsite.jobs.models import Job, JobCell
from benchsite.results.models import Result
from tests.jobs.conftest import FAST_OPTIONS, FAST_TIMING, SMALL_SPEC, wait_for

pytestmark = [pytest.mark.torch, pytest.mark.django_db(transaction=True)]


def ended(job_id):
    """the job to end"""
    job = Job.objects.get(pk=job_id)
    return job if job.ended else None


def no_duplicate_results():
    per_run_and_series = Result.objects.values("run", "series").annotate(n=Count("id"))
    return not per_run_and_series.filter(n__gt=1).exists()


def test_api_and_command_jobs_run_on_the_worker(celery_worker, api, make_token, tmp_path, capsys):
    response = api.post("/api/v3/jobs", {"spec": SMALL_SPEC, "queue": "cpu",
                                         "timing": FAST_TIMING, "head_sha": "d" * 40},
                        format="json", HTTP_AUTHORIZATION=f"Bearer {make_token('pytorch/ao')}")
    assert response.status_code == 201, response.json()
    assert response.json()["status"] == "pending"  # queued, not run in the request
    job = wait_for(lambda: ended(response.json()["id"]))
    assert job.status == "succeeded" and job.cells_done == 4
    assert {cell.worker.split(" pid ")[0] for cell in job.cells.all()} == {
        f"test{os.getpid()}@{os.uname().nodename}"}
    speedups = Result.objects.filter(run__head_sha="d" * 40, series__metric="Fwd Speedup (x)")
    assert speedups.count() == 4

    spec = tmp_path / "small.yml"
    spec.write_text(SMALL_SPEC)
    call_command("bench", "run", str(spec), "--queue", "cpu", "--wait", *FAST_OPTIONS,
                 "--sha", "e" * 40)
    assert "succeeded" in capsys.readouterr().out
    assert Result.objects.filter(run__head_sha="e" * 40, series__metric="status").count() == 0
    assert Result.objects.filter(run__head_sha="e" * 40).count() > 4
    assert no_duplicate_results()


def start_slow_job(api, token: str, pairs: int) -> tuple[int, JobCell]:
    """Submit a job whose cells take seconds (each pair is four blocks of 10 ms); return it
    once one of its cells runs."""
    slow = {"min_pairs": pairs, "max_pairs": pairs, "warmup_s": 0.0, "min_sample_s": 0.01}
    response = api.post("/api/v3/jobs", {"spec": SMALL_SPEC, "queue": "cpu", "timing": slow},
                        format="json", HTTP_AUTHORIZATION=f"Bearer {token}")
    job_id = response.json()["id"]

    def a_running_cell():
        """a cell to start running"""
        return JobCell.objects.filter(job_id=job_id, status="running").first()

    return job_id, wait_for(a_running_cell)


def test_killed_worker_process_cell_is_delivered_again(celery_worker, make_token, api):
    job_id, victim = start_slow_job(api, make_token("pytorch/ao"), pairs=30)
    pid = int(victim.worker.rsplit(" pid ", 1)[1])
    assert pid != celery_worker.pid  # the pool process running the cell, not the supervisor
    os.kill(pid, signal.SIGKILL)

    job = wait_for(lambda: ended(job_id), timeout=300)
    cells = {cell.pk: cell for cell in job.cells.all()}
    assert job.status == "succeeded" and job.cells_done == job.cells_total == 4
    assert all(cell.status == "succeeded" for cell in cells.values())
    assert cells[victim.pk].attempts == 2
    assert no_duplicate_results()
    assert Result.objects.filter(series__metric="Fwd Speedup (x)").count() == 4


def test_a_lost_database_connection_is_retried(celery_worker, make_token, api):
    from django.db import connection

    job_id, victim = start_slow_job(api, make_token("pytorch/ao"), pairs=30)
    with connection.cursor() as cursor:  # what a database restart or failover does
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")
    job = wait_for(lambda: ended(job_id), timeout=300)
    assert job.status == "succeeded" and job.cells_done == 4
    assert JobCell.objects.get(pk=victim.pk).attempts == 2
    assert no_duplicate_results()
