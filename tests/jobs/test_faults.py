"""Faults on real processes: a whole worker killed mid-cell, only its pool child killed, a
cell past the hard time limit, and a broker that restarts without its data. Every cell ends
`succeeded` or `failed` with a reason and every job ends, within the sweeper's period.

The sweeper runs as celery beat inside a worker of the control queue, every second; cells
write a heartbeat every second and are orphaned after 3 s without one.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess

import pytest
from django.db.models import Count

from benchsite.jobs.models import Job, JobCell
from benchsite.jobs.submit import submit_job
from benchsite.jobs.tasks import run_cell
from benchsite.results.models import Result
from tests.jobs.conftest import (
    BROKER,
    redis_reachable,
    sending_to,
    start_worker,
    stop_worker,
    wait_for,
)

pytestmark = [pytest.mark.torch, pytest.mark.django_db(transaction=True)]

FAST = {"BENCH_HEARTBEAT_INTERVAL": 1, "BENCH_HEARTBEAT_TIMEOUT": 3, "BENCH_SWEEP_INTERVAL": 1}
# The sweeper's period plus the heartbeat timeout plus a cell's run: what a fault may cost.
ENDS_WITHIN = 90
ONE_CELL_SPEC = """\
quantization_config_recipe_names: ["int8wo"]
output_dir: "var/test-jobs"
model_params:
  - name: "tiny"
    matrix_shapes:
      - name: "custom"
        shapes: [[32, 64, 64]]
    high_precision_dtype: "torch.bfloat16"
    torch_compile_mode: false
    device: "cpu"
    model_type: "linear"
"""


def slow(pairs: int) -> dict:
    """Timing that makes a cell last at least pairs / 12 seconds (each pair is 8 blocks of
    10 ms)."""
    return {"min_pairs": pairs, "max_pairs": pairs, "warmup_s": 0.0, "min_sample_s": 0.01,
            "budget_s": 600}


def submit(pairs: int, spec: str = ONE_CELL_SPEC) -> Job:
    return submit_job(spec, name="faults.yml", queue="cpu", via="api", timing=slow(pairs))


def running_cell(job: Job) -> JobCell:
    def a_running_cell():
        """a cell to start running"""
        return JobCell.objects.filter(job=job, status="running").first()

    return wait_for(a_running_cell, timeout=ENDS_WITHIN)


def ended(job: Job) -> Job:
    def job_ended():
        """the job to end"""
        job.refresh_from_db()
        return job if job.ended else None

    return wait_for(job_ended, timeout=ENDS_WITHIN, interval=0.5)


def assert_every_cell_ended_with_a_reason(job: Job) -> None:
    for cell in job.cells.all():
        assert cell.status in ("succeeded", "failed"), (cell.key, cell.status)
        if cell.status == "failed":
            assert cell.error.strip(), cell.key
    per_run_and_series = Result.objects.values("run", "series").annotate(n=Count("id"))
    assert not per_run_and_series.filter(n__gt=1).exists()  # nothing stored twice


@pytest.fixture
def control(transactional_db):
    """A worker on the control queue only, with the sweeper's beat schedule."""
    redis_reachable(BROKER)
    worker = start_worker(BROKER, name="control", beat=True, queues="control", **FAST)
    try:
        with sending_to(BROKER):
            yield worker
    finally:
        stop_worker(worker)


def test_a_whole_worker_killed_mid_cell(control):
    cells = start_worker(BROKER, name="cells", queues="cpu", **FAST)
    try:
        job = submit(pairs=24)
        victim = running_cell(job)
        os.killpg(cells.pid, signal.SIGKILL)  # the machine is gone: supervisor and pool child
        cells.wait()
        cells = start_worker(BROKER, name="cells2", queues="cpu", **FAST)
        job = ended(job)
    finally:
        stop_worker(cells)
    assert job.status == "succeeded" and job.cells_done == job.cells_total == 1
    assert_every_cell_ended_with_a_reason(job)
    victim.refresh_from_db()
    assert victim.attempts == 2 and victim.worker.startswith("cells2")


def test_only_the_pool_child_killed_mid_cell(control):
    cells = start_worker(BROKER, name="cells", queues="cpu", **FAST)
    try:
        job = submit(pairs=24)
        victim = running_cell(job)
        child = int(victim.worker.rsplit(" pid ", 1)[1])
        assert child != cells.pid
        os.kill(child, signal.SIGKILL)
        job = ended(job)
    finally:
        stop_worker(cells)
    assert job.status == "succeeded"
    assert_every_cell_ended_with_a_reason(job)
    victim.refresh_from_db()
    assert victim.attempts == 2


def test_a_cell_past_the_hard_time_limit_fails_and_the_job_ends(control, monkeypatch):
    # The limits travel with the message, from the sender's settings (Celery caches them).
    monkeypatch.setattr(run_cell, "time_limit", 2)
    monkeypatch.setattr(run_cell, "soft_time_limit", None)
    monkeypatch.setattr(run_cell, "_exec_options", None)
    cells = start_worker(BROKER, name="cells", queues="cpu", BENCH_CELL_TIME_LIMIT=2,
                         BENCH_CELL_SOFT_TIME_LIMIT=0, **FAST)
    try:
        job = ended(submit(pairs=120))  # 10 s or more
    finally:
        stop_worker(cells)
    assert job.status == "failed" and job.cells_done == 1
    assert_every_cell_ended_with_a_reason(job)
    for cell in job.cells.all():
        assert cell.error.startswith("time limit: killed at the hard time limit of 2 s")
        assert cell.attempts == 1  # not run again


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_redis(port: int) -> subprocess.Popen:
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no"], stdout=subprocess.DEVNULL)

    def answers():
        """the broker to answer"""
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    wait_for(answers, timeout=10, interval=0.1)
    return server


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not installed")
def test_a_broker_restarted_without_its_data(transactional_db, api, make_token):
    port = free_port()
    broker = f"redis://127.0.0.1:{port}/0"
    server = start_redis(port)
    workers = []
    try:
        workers = [start_worker(broker, name="control", beat=True, queues="control", **FAST),
                   start_worker(broker, name="cells", queues="cpu", **FAST)]
        with sending_to(broker):
            # Two cells queued; once the first runs, the broker dies and comes back empty.
            lost = submit(pairs=12, spec=ONE_CELL_SPEC.replace("[[32, 64, 64]]",
                                                               "[[32, 64, 64], [16, 32, 32]]"))
            running_cell(lost)
            server.kill()
            server.wait()
            # Submitted while the broker is down: recorded, answered 202.
            response = api.post("/api/v3/jobs", {"spec": ONE_CELL_SPEC, "queue": "cpu",
                                                 "timing": slow(4)}, format="json",
                                HTTP_AUTHORIZATION=f"Bearer {make_token('pytorch/ao')}")
            assert response.status_code == 202, response.content
            assert response.json()["status"] == "pending"
            assert response.json()["enqueued_at"] is None
            server = start_redis(port)
            outboxed = ended(Job.objects.get(pk=response.json()["id"]))
            lost = ended(lost)
    finally:
        for worker in workers:
            stop_worker(worker)
        server.kill()
        server.wait()
    for job in (lost, outboxed):
        assert job.status == "succeeded", [(c.key, c.status, c.error) for c in job.cells.all()]
        assert_every_cell_ended_with_a_reason(job)
    assert outboxed.enqueued_at is not None
