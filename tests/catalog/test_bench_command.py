"""`manage.py bench` and schedules with spec files: the same job path as the API, in-process
(eager Celery); configs by name are in test_runs."""

import json

import pytest
from celery import current_app
from django.core.management import CommandError, call_command
from django_celery_beat.models import PeriodicTask

from benchsite.catalog.schedules import TASK
from benchsite.catalog.tasks import submit_scheduled
from benchsite.jobs.models import Job
from tests.jobs.conftest import FAST_OPTIONS, FAST_TIMING, SMALL_SPEC

# Cells are queued when the submitting transaction commits, so these tests commit.
pytestmark = [pytest.mark.torch, pytest.mark.django_db(transaction=True)]


def test_bench_command_waits_and_prints_each_cell(tmp_path, capsys):
    spec = tmp_path / "small.yml"
    spec.write_text(SMALL_SPEC)
    call_command("bench", "run", str(spec), "--queue", "cpu", "--wait", *FAST_OPTIONS)
    out = capsys.readouterr().out
    assert "job 1: 4 cells on queue 'cpu'" in out.replace(f"job {Job.objects.get().pk}", "job 1")
    assert out.count("succeeded") >= 5
    with pytest.raises(CommandError, match="no such file|No such file"):
        call_command("bench", "run", str(tmp_path / "missing.yml"))


def test_schedule_task_submits_a_spec_file(tmp_path):
    spec = tmp_path / "nightly.yml"
    spec.write_text(SMALL_SPEC)
    job_id = submit_scheduled.apply(args=[str(spec), "cpu"],
                                    kwargs={"timing": FAST_TIMING}).get()
    job = Job.objects.get(pk=job_id)
    assert job.submitted_via == "schedule" and job.status == "succeeded"


def test_bench_schedule_creates_a_beat_entry_that_submits_the_spec(tmp_path, capsys):
    spec = tmp_path / "nightly.yml"
    spec.write_text(SMALL_SPEC)
    call_command("bench", "schedule", str(spec), "--queue", "cpu", "--cron", "0 3 * * *")
    assert "created schedule 'nightly.yml on cpu'" in capsys.readouterr().out
    entry = PeriodicTask.objects.get(task=TASK)
    assert entry.task == submit_scheduled.name == "benchsite.catalog.tasks.submit_scheduled"
    assert str(entry.crontab).startswith("0 3 * * *")
    with pytest.raises(CommandError, match="five fields"):
        call_command("bench", "schedule", str(spec), "--cron", "daily")
    job_id = current_app.tasks[entry.task].apply(kwargs=json.loads(entry.kwargs)).get()
    assert Job.objects.get(pk=job_id).submitted_via == "schedule"
