"""The embedded default (nothing configured; scripts/run's workers): a real worker on kombu's
filesystem broker runs the jobs, so submitting one returns as soon as it is queued, and a
queue no worker takes is said."""

import os
import subprocess
import sys
import time

import pytest
from django.core.management import call_command

from benchsite.jobs.broker import consumers
from benchsite.jobs.models import Job
from tests.jobs.conftest import FAST_OPTIONS, FAST_TIMING, ROOT, SMALL_SPEC, wait_for

pytestmark = [pytest.mark.torch, pytest.mark.django_db(transaction=True)]


def test_bench_run_returns_once_queued_and_the_worker_runs_the_job(filesystem_worker, tmp_path,
                                                                    capsys):
    spec = tmp_path / "small.yml"
    spec.write_text(SMALL_SPEC)

    def answering():
        """the worker to answer for queue cpu (scripts/run's are up before its job)"""
        return consumers("cpu")

    wait_for(answering, timeout=60)
    started = time.monotonic()
    call_command("bench", "run", str(spec), "--queue", "cpu", *FAST_OPTIONS)
    returned_after = time.monotonic() - started
    job = Job.objects.get()
    assert job.enqueued_at is not None and job.cells_done < job.cells_total
    # queued, not run here: the cells are the worker's (below), and 4 of them would take longer
    assert returned_after < 10, returned_after
    said = capsys.readouterr()
    assert f"job {job.pk}: 4 cells on queue 'cpu'" in said.out
    assert "no worker" not in said.err  # the fixture's worker answered for queue cpu

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


def test_bench_run_says_when_no_worker_takes_the_queue(filesystem_worker, tmp_path, capsys):
    spec = tmp_path / "small.yml"
    spec.write_text(SMALL_SPEC)
    call_command("bench", "run", str(spec), "--queue", "cuda", *FAST_OPTIONS)
    said = capsys.readouterr().err
    assert "no worker takes queue 'cuda'" in said
    assert "celery -A benchsite worker -Q cuda" in said
    assert Job.objects.get().status == "pending"  # kept, for a worker that comes later


def test_with_nothing_configured_the_site_and_commands_share_the_embedded_broker(tmp_path):
    """No CELERY_BROKER_URL: the filesystem broker under var/, tasks never run in-process."""
    environ = {key: value for key, value in os.environ.items()
               if key not in ("CELERY_BROKER_URL", "CELERY_BROKER_FOLDER")}
    environ.update(DJANGO_SETTINGS_MODULE="benchsite.settings", BENCH_VAR_DIR=str(tmp_path),
                   DATABASE_URL=f"sqlite:///{tmp_path}/site.db")
    code = ("import django; django.setup(); from django.conf import settings as s; "
            "from benchsite.celery import app; "
            "print(s.CELERY_BROKER_URL, app.conf.task_always_eager, "
            "s.CELERY_BROKER_TRANSPORT_OPTIONS['data_folder_in'])")
    shown = subprocess.run([sys.executable, "-c", code], env=environ, cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    assert shown == ["filesystem://localhost/", "False", f"{tmp_path}/broker/site.db/queue"]


@pytest.mark.parametrize("served, configured, expected", [
    (None, None, "http://localhost:8000"),
    ("http://127.0.0.1:8311", None, "http://127.0.0.1:8311"),
    ("http://127.0.0.1:8311", "https://bench.example", "https://bench.example"),
])
def test_commands_link_to_the_server_scripts_run_serves(tmp_path, served, configured, expected):
    """A second shell's commands (demo_regressions' gate lines, reports) link to the server
    that `scripts/run` serves (var/site-url) unless BENCH_SITE_URL says otherwise."""
    environ = {key: value for key, value in os.environ.items() if key != "BENCH_SITE_URL"}
    environ.update(DJANGO_SETTINGS_MODULE="benchsite.settings", BENCH_VAR_DIR=str(tmp_path),
                   DATABASE_URL=f"sqlite:///{tmp_path}/site.db")
    if served:
        (tmp_path / "site-url").write_text(served + "\n")
    if configured:
        environ["BENCH_SITE_URL"] = configured
    code = "import django; django.setup(); from django.conf import settings; " \
           "print(settings.BENCH_SITE_URL)"
    shown = subprocess.run([sys.executable, "-c", code], env=environ, cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.strip()
    assert shown == expected
