"""A real `celery worker` on Redis and PostgreSQL bisects the demo repository started from
the API; its pool process is killed mid-step, the bisect is delivered again, finishes, and
nothing was stored twice. The sweeper on a real beat sends a bisect whose machine was lost
to a live worker."""

from __future__ import annotations

import os
import signal
from datetime import timedelta

import pytest
from django.db.models import Count
from django.utils import timezone

from benchsite.access.models import AllowedCodeModule
from benchsite.bisects.models import Bisect, Source
from benchsite.results.models import Result, Upload
from runner.sources import demo
from tests.jobs.conftest import (
    BROKER,
    redis_reachable,
    sending_to,
    start_worker,
    stop_worker,
    wait_for,
)

pytestmark = [pytest.mark.torch, pytest.mark.once, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def bisect_worker(transactional_db, tmp_path):
    redis_reachable(BROKER)
    worker = start_worker(BROKER, name="bisect", BENCH_SOURCE_CACHE=tmp_path / "sources")
    try:
        with sending_to(BROKER):
            yield worker
    finally:
        stop_worker(worker)


def test_a_worker_bisects_and_a_killed_step_runs_again(bisect_worker, demo_repo, api,
                                                        make_token):
    path, shas = demo_repo
    AllowedCodeModule.objects.create(module="demopkg")
    Source.objects.create(name="demo", location=str(path), repo="demo/pkg", mode="command",
                          build_command=demo.BUILD_COMMAND)
    response = api.post("/api/v3/bisects", {
        "spec": demo.SPEC, "source": "demo", "good": shas[demo.SLOW - 3],
        "bad": shas[demo.SLOW + 3], "queue": "cpu"}, format="json",
        HTTP_AUTHORIZATION=f"Bearer {make_token('demo/pkg')}")
    assert response.status_code == 201, response.json()
    pk = response.json()["id"]

    def measuring_a_middle_commit():
        """a commit inside the range to be measured"""
        bisect = Bisect.objects.get(pk=pk)
        return bisect if "compared with" in bisect.progress and any(
            step.position not in (0, 6) for step in bisect.steps.all()) else None

    running = wait_for(measuring_a_middle_commit, timeout=400)
    pid = int(running.worker.rsplit(" pid ", 1)[1])
    assert pid != bisect_worker.pid  # the pool process, not the supervisor
    os.kill(pid, signal.SIGKILL)

    bisect = wait_for(lambda: (b := Bisect.objects.get(pk=pk)).ended and b, timeout=600)
    assert bisect.state == "culprit", bisect.outcome
    assert bisect.culprit_sha == shas[demo.SLOW] and bisect.attempts == 2
    rounds = sum(len(step.rounds) for step in bisect.steps.all())
    uploads = Upload.objects.filter(idempotency_key__startswith=f"bisect-{pk}-")
    assert uploads.count() == rounds
    duplicates = Result.objects.values("run", "series").annotate(n=Count("id")).filter(n__gt=1)
    assert not duplicates.exists()
    assert api.get(f"/api/v3/bisects/{pk}").json()["culprit_sha"] == shas[demo.SLOW]


def test_beat_sends_a_bisect_whose_worker_was_lost_to_a_live_worker(
        transactional_db, demo_repo, tmp_path, monkeypatch):
    """The sweeper on celery beat (a control worker, as compose runs it) finds a bisect left
    running by a machine that is gone, queues it again on its queue, and a cpu worker runs
    it to its culprit."""
    from benchsite.bisects import tasks
    from benchsite.bisects.start import start_spec

    redis_reachable(BROKER)
    path, shas = demo_repo
    source = Source.objects.create(name="demo", location=str(path), repo="demo/pkg",
                                   mode="command", build_command=demo.BUILD_COMMAND,
                                   modules="demopkg")
    monkeypatch.setattr(tasks.run_bisect, "apply_async", lambda **kwargs: None)
    bisect = start_spec(spec_yaml=demo.SPEC, spec_name="demo.yml", source=source,
                        good=shas[demo.SLOW - 1], bad=shas[demo.SLOW + 1])
    monkeypatch.undo()
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Bisect.objects.filter(pk=bisect.pk).update(
        state="running", worker="gone@elsewhere pid 1", attempts=1, started_at=an_hour_ago,
        heartbeat_at=an_hour_ago, enqueued_at=an_hour_ago)
    fast = {"BENCH_SWEEP_INTERVAL": 1, "BENCH_HEARTBEAT_INTERVAL": 1,
            "BENCH_HEARTBEAT_TIMEOUT": 5, "BENCH_SOURCE_CACHE": tmp_path / "sources"}
    workers = [start_worker(BROKER, name="bisect-control", beat=True, queues="control", **fast),
               start_worker(BROKER, name="bisect-cpu", queues="cpu", **fast)]
    try:
        ended = wait_for(lambda: (b := Bisect.objects.get(pk=bisect.pk)).ended and b,
                         timeout=400)
    finally:
        for worker in workers:
            stop_worker(worker)
    assert ended.state == "culprit" and ended.culprit_sha == shas[demo.SLOW], ended.outcome
    assert ended.attempts == 2 and ended.worker.startswith("bisect-cpu")
