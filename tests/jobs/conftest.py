"""A real Celery worker process against Redis and the test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BROKER = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
# A Redis database tests may empty (scripts/test gives the SQLite run another one).
SCRATCH = BROKER.rsplit("/", 1)[0] + "/" + os.environ.get("TEST_REDIS_SCRATCH_DB", "8")

SMALL_SPEC = """\
quantization_config_recipe_names: ["int8wo", "int8dq"]
output_dir: "var/test-jobs"
model_params:
  - name: "tiny"
    matrix_shapes:
      - name: "custom"
        shapes: [[32, 64, 64], [64, 128, 128]]
    high_precision_dtype: "torch.bfloat16"
    torch_compile_mode: false
    device: "cpu"
    model_type: "linear"
"""
# Milliseconds of timing a cell; the wide CI target keeps such short cells from all being
# marked unstable.
FAST_TIMING = {"samples": 3, "warmup_s": 0.0, "min_sample_s": 0.0, "max_pairs": 12,
               "budget_s": 0.05, "ci_target": 0.5}
FAST_OPTIONS = ["--samples", "3", "--budget", "0.05", "--max-pairs", "12", "--ci-target", "0.5"]


def _database_url() -> str:
    """The test database's URL, for the worker process."""
    from django.db import connection

    database = connection.settings_dict
    # SQLite's test database lives in this process's memory: a worker process cannot open it.
    if connection.vendor != "postgresql":
        pytest.skip("the worker integration tests need PostgreSQL (set DATABASE_URL)")
    host = database["HOST"] or "127.0.0.1"
    return (f"postgres://{database['USER']}@{host}:{database['PORT'] or 5432}/"
            f"{database['NAME']}")


def redis_reachable(url: str) -> None:
    """Empty the broker's database; skip (fail in CI) when Redis does not answer."""
    import redis

    try:
        redis.Redis.from_url(url).flushdb()
    except redis.ConnectionError as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Redis at {url} is unreachable: {error}")
        pytest.skip(f"Redis at {url} is unreachable")


def start_worker(broker: str, name: str = "", beat: bool = False, queues: str = "cpu,control",
                 **settings: object) -> subprocess.Popen:
    """`celery -A benchsite worker -Q QUEUES -c 1` (with `beat`, the sweeper's schedule in the
    same process), in a session of its own so that the whole of it can be killed;
    `settings` are environment variables for it (e.g. BENCH_SWEEP_INTERVAL=1)."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "benchsite.settings",  # not eager
           "DATABASE_URL": _database_url(), "CELERY_BROKER_URL": broker,
           "LOG_LEVEL": "WARNING", **{key: str(value) for key, value in settings.items()}}
    command = [sys.executable, "-m", "celery", "-A", "benchsite", "worker", "-Q", queues,
               "-c", "1", "--without-gossip", "--without-mingle", "--without-heartbeat",
               "-n", f"{name or 'test'}{os.getpid()}@%h", "--loglevel", "WARNING"]
    if beat:  # the schedule in memory: CELERY_BEAT_SCHEDULE, as the database scheduler has it
        command += ["--beat", "--scheduler", "celery.beat:Scheduler",
                    "--schedule", f"/tmp/celerybeat-{os.getpid()}-{name}"]
    return subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)


def stop_worker(worker: subprocess.Popen) -> None:
    if worker.poll() is not None:
        return
    worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()


@contextmanager
def sending_to(broker: str, **transport_options):
    """Point the test process's Celery app at the broker (tasks are no longer eager)."""
    from benchsite.celery import app

    saved = {key: app.conf[key] for key in ("task_always_eager", "broker_url",
                                            "broker_transport_options")}
    _reconnect(app, task_always_eager=False, broker_url=broker,
               broker_transport_options={**saved["broker_transport_options"],
                                         **transport_options})
    try:
        yield app
    finally:
        _reconnect(app, **saved)


@pytest.fixture
def celery_worker(transactional_db):
    """Starts a worker (queues cpu and control); tasks sent by the test go to it."""
    redis_reachable(BROKER)
    worker = start_worker(BROKER)
    try:
        with sending_to(BROKER):
            yield worker
    finally:
        stop_worker(worker)


@pytest.fixture
def filesystem_worker(transactional_db, tmp_path):
    """The embedded default of scripts/run: a worker on kombu's filesystem broker (a folder,
    no service), queues cpu and control; tasks sent by the test go to it."""
    from benchsite.celery import filesystem_broker

    folder, broker = tmp_path / "broker", "filesystem://localhost/"
    worker = start_worker(broker, name="fs", CELERY_BROKER_FOLDER=folder)
    try:
        with sending_to(broker, **filesystem_broker(folder)):
            yield worker
    finally:
        stop_worker(worker)


def _reconnect(app, **conf) -> None:
    """Point the test process's Celery app at another broker (forgets cached pools)."""
    app._pool = None
    app.amqp._producer_pool = None
    app.conf.update(conf)


def wait_for(predicate, timeout: float = 180, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {predicate.__doc__}")

