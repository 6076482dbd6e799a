"""The sweeper, the outbox and claims, in-process (the fault tests run them on real workers)."""

from __future__ import annotations

import base64
import json
import os
import time
from datetime import timedelta

import pytest
import redis
from celery.exceptions import TimeLimitExceeded
from django.contrib.auth.models import Permission, User
from django.utils import timezone

from benchsite.jobs import broker, tasks
from benchsite.jobs.heartbeat import cell_heartbeat
from benchsite.jobs.models import Job, JobCell
from benchsite.jobs.submit import submit_job
from benchsite.regressions import receivers
from benchsite.regressions import tasks as regression_tasks
from benchsite.results.ingest import store_upload
from benchsite.results.models import Upload
from tests.jobs.conftest import (
    FAST_TIMING,
    SCRATCH,
    SMALL_SPEC,
    redis_reachable,
    sending_to,
)

pytestmark = [pytest.mark.torch, pytest.mark.django_db(transaction=True)]
UNREACHABLE = "redis://127.0.0.1:9/0"  # nothing listens on the discard port
AN_HOUR_AGO = timedelta(hours=1)


@pytest.fixture
def undelivered(monkeypatch):
    """Submitted cells stay pending, as if no worker had taken them yet."""
    from benchsite.jobs import submit

    monkeypatch.setattr(submit, "enqueue", lambda job: None)


def make_job(**options) -> Job:
    return submit_job(SMALL_SPEC, name="s.yml", queue="cpu", via="api", timing=FAST_TIMING,
                      **options)


def orphan(cell: JobCell, attempts: int = 1, ran: timedelta = timedelta(seconds=10)) -> None:
    """Leave the cell as a worker that died an hour ago, `ran` into the cell, leaves it."""
    started = timezone.now() - AN_HOUR_AGO
    JobCell.objects.filter(pk=cell.pk).update(
        status="running", attempts=attempts, worker="gone@elsewhere pid 1", started_at=started,
        heartbeat_at=started + ran)


def test_submitting_while_the_broker_is_down_answers_202_and_the_sweeper_queues_it(api):
    user = User.objects.create_user("maintainer")
    user.user_permissions.add(Permission.objects.get(codename="add_job"))
    api.force_authenticate(user)
    with sending_to(UNREACHABLE):
        response = api.post("/api/v3/jobs", {"spec": SMALL_SPEC, "timing": FAST_TIMING},
                            format="json")
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "pending" and response.json()["enqueued_at"] is None
    job = Job.objects.get(pk=response.json()["id"])
    assert job.cells.filter(status="pending").count() == 4

    assert tasks.sweep_outbox() == (0, 0)  # a job just submitted is its enqueue's to send
    Job.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(minutes=1))
    with sending_to(UNREACHABLE):
        assert tasks.sweep_outbox() == (0, 0)  # still down: stays in the outbox
    job.refresh_from_db()
    assert job.enqueued_at is None and job.status == "pending"
    assert tasks.sweep_outbox() == (1, 0)  # the broker is back (here: in-process)
    job.refresh_from_db()
    assert job.status == "succeeded" and job.enqueued_at is not None


def test_a_job_never_queued_is_failed_with_the_reason(settings, undelivered):
    settings.BENCH_ENQUEUE_GIVE_UP = 60
    job = make_job()
    Job.objects.filter(pk=job.pk).update(created_at=timezone.now() - AN_HOUR_AGO)
    assert tasks.sweep_outbox() == (0, 1)
    job.refresh_from_db()
    assert job.status == "failed" and job.cells_done == 4
    errors = set(job.cells.values_list("error", flat=True))
    assert errors == {"never queued: the broker could not take the job's tasks for 60 s "
                      "(BENCH_ENQUEUE_GIVE_UP)"}

    # A job that ran for days and lost the broker on a re-send is queued again, not failed.
    started = make_job()
    Job.objects.filter(pk=started.pk).update(created_at=timezone.now() - timedelta(days=2),
                                             started_at=timezone.now() - timedelta(days=2))
    assert tasks.sweep_outbox() == (1, 0)
    assert Job.objects.get(pk=started.pk).status == "succeeded"


def test_orphaned_cells_are_queued_again_or_failed_with_the_reason(settings, undelivered):
    settings.BENCH_CELL_TIME_LIMIT = 600
    job = make_job()
    again, exhausted, timed_out, alive = job.cells.all()
    orphan(again)
    orphan(exhausted, attempts=tasks.MAX_ATTEMPTS)
    orphan(timed_out, ran=timedelta(seconds=600))
    JobCell.objects.filter(pk=alive.pk).update(  # its worker still writes its heartbeat
        status="running", attempts=1, worker="busy@elsewhere pid 1",
        started_at=timezone.now() - AN_HOUR_AGO, heartbeat_at=timezone.now())

    assert tasks.sweep_orphaned_cells() == {"cells failed at the time limit": 1,
                                            "cells failed after lost workers": 1,
                                            "cells queued again": 1}
    cells = {cell.pk: cell for cell in job.cells.all()}
    assert (cells[again.pk].status, cells[again.pk].attempts) == ("succeeded", 2)
    assert cells[exhausted.pk].status == "failed"
    assert cells[exhausted.pk].error.startswith("gave up after 3 attempts")
    assert cells[timed_out.pk].status == "failed"
    assert cells[timed_out.pk].error == ("time limit: killed at the hard time limit of 600 s "
                                         "(BENCH_CELL_TIME_LIMIT)")
    assert cells[alive.pk].status == "running"
    assert tasks.run_cell.apply(args=[alive.pk]).get().startswith("not runnable")


def test_a_cell_killed_at_the_hard_limit_is_failed_and_its_job_ends(undelivered):
    job = submit_job(SMALL_SPEC.replace("[[32, 64, 64], [64, 128, 128]]", "[[32, 64, 64]]"),
                     name="one.yml", queue="cpu", via="api")
    cells = list(job.cells.all())
    for cell in cells:
        tasks.claim(cell.pk, worker="w@host pid 1")
        # What the worker's main process calls once the pool child is killed.
        tasks.run_cell.on_failure(TimeLimitExceeded(5.0), "id", [cell.pk], {}, None)
    job.refresh_from_db()
    assert job.status == "failed"
    assert {cell.error for cell in job.cells.all()} == {
        "time limit: killed at the hard time limit of 5 s (BENCH_CELL_TIME_LIMIT)"}


def test_a_redelivered_cell_is_taken_over_only_from_a_dead_process(undelivered):
    job = make_job()
    cell = job.cells.first()
    here = f"node@host pid {os.getpid()}"
    dead = subprocess_pid_that_exited()
    JobCell.objects.filter(pk=cell.pk).update(status="running", attempts=1, worker=here,
                                              started_at=timezone.now(),
                                              heartbeat_at=timezone.now())
    assert tasks.claim(cell.pk, worker="other@host pid 2") is None  # another node's, alive
    assert tasks.claim(cell.pk, worker="node@host pid 2") is None   # this node, pid alive
    JobCell.objects.filter(pk=cell.pk).update(worker=f"node@host pid {dead}")
    claimed = tasks.claim(cell.pk, worker="node@host pid 2")  # its pool child was killed
    assert claimed is not None and claimed.attempts == 2


def subprocess_pid_that_exited() -> int:
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_heartbeat_is_written_while_the_cell_runs(settings, undelivered):
    settings.BENCH_HEARTBEAT_INTERVAL = 0.05
    cell = make_job().cells.first()
    claimed = tasks.claim(cell.pk, worker="w@host pid 1")
    first = claimed.heartbeat_at
    with cell_heartbeat(cell.pk, "w@host pid 1"):
        time.sleep(0.5)
    cell.refresh_from_db()
    assert cell.heartbeat_at > first
    last = cell.heartbeat_at
    time.sleep(0.2)
    cell.refresh_from_db()
    assert cell.heartbeat_at == last  # stops with the run


def test_the_broker_losing_its_data_is_noticed(settings):
    url = SCRATCH
    redis_reachable(url)
    settings.CELERY_BROKER_URL = url
    assert broker.broker_lost_data()  # no marker yet
    assert not broker.broker_lost_data()
    redis.Redis.from_url(url).flushdb()  # what a restart without persistence does
    assert broker.broker_lost_data()
    settings.CELERY_BROKER_URL = "amqp://guest@localhost//"
    assert not broker.broker_lost_data()


def test_detection_owed_is_recorded_with_the_upload_and_redone_when_lost(settings, monkeypatch):
    settings.BENCH_DETECT_ON_UPLOAD = True
    body = b'[{"benchmark": {"name": "b"}, "model": {"name": "m"}, ' \
           b'"metric": {"name": "latency", "benchmark_values": [1.0]}}]'
    metadata = {"repo": "pytorch/ao", "head_branch": "main", "head_sha": "a" * 40}
    done = store_upload(body, metadata=metadata).upload
    done.refresh_from_db()
    assert done.detection_owed_at is None  # queued on commit and done (in-process)

    class LostTask:
        @staticmethod
        def delay(upload_id):
            raise ConnectionError("broker down")

    monkeypatch.setattr(receivers, "detect_upload", LostTask)
    lost = store_upload(body, metadata={**metadata, "head_sha": "b" * 40}).upload
    lost.refresh_from_db()
    assert lost.detection_owed_at is not None
    monkeypatch.undo()
    settings.BENCH_DETECTION_RETRY_AFTER = 600
    assert regression_tasks.detect_owed.apply().get() == 0  # not overdue yet
    Upload.objects.filter(pk=lost.pk).update(detection_owed_at=timezone.now() - AN_HOUR_AGO)
    assert regression_tasks.detect_owed.apply().get() == 1
    lost.refresh_from_db()
    assert lost.detection_owed_at is None

    quiet = store_upload(body, metadata={**metadata, "head_sha": "c" * 40}, announce=False)
    assert Upload.objects.get(pk=quiet.upload.pk).detection_owed_at is None


def test_cells_a_lost_worker_took_but_never_claimed_are_sent_again(settings, undelivered):
    url = SCRATCH
    redis_reachable(url)
    client = redis.Redis.from_url(url)
    settings.CELERY_BROKER_URL = url
    job = make_job()
    taken, running, fresh, _ = job.cells.all()
    JobCell.objects.filter(pk=running.pk).update(  # a live worker's long cell
        status="running", attempts=1, worker="busy@elsewhere pid 1",
        started_at=timezone.now(), heartbeat_at=timezone.now())
    an_hour_ago = time.time() - 3600
    # As kombu's Redis transport keeps the messages a worker took and did not acknowledge.
    for tag, cell, when in [("t1", taken, an_hour_ago), ("t2", running, an_hour_ago),
                            ("t3", fresh, time.time())]:
        body = base64.b64encode(json.dumps([[cell.pk], {}, {}]).encode()).decode()
        message = {"body": body, "headers": {"task": "benchsite.jobs.tasks.run_cell"},
                   "properties": {"body_encoding": "base64", "delivery_tag": tag}}
        client.hset("unacked", tag, json.dumps([message, "", "cpu"]))
        client.zadd("unacked_index", {tag: when})

    assert tasks.requeue_lost_reservations() == 1
    assert JobCell.objects.get(pk=taken.pk).status == "succeeded"  # sent again, ran here
    assert JobCell.objects.get(pk=fresh.pk).status == "pending"  # just taken: left alone
    assert sorted(client.hkeys("unacked")) == [b"t2", b"t3"]
    assert tasks.requeue_lost_reservations() == 0


def test_the_admin_shows_heartbeats_and_whether_a_job_was_queued(client, undelivered):
    job = make_job()
    client.force_login(User.objects.create_superuser("admin", "a@example.com", "pw"))
    page = client.get(f"/admin/jobs/job/{job.pk}/change/")
    assert page.status_code == 200
    assert b"Enqueued at" in page.content and b"Heartbeat at" in page.content
