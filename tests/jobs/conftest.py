"""A real Celery worker process against Redis and the test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BROKER = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0").rsplit("/", 1)[0] + "/15"

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


@pytest.fixture
def celery_worker(transactional_db):
    """Starts `celery -A benchsite worker -Q cpu -c 1`; tasks sent by the test go to it."""
    import redis

    from benchsite.celery import app

    try:
        redis.Redis.from_url(BROKER).flushdb()
    except redis.ConnectionError as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Redis at {BROKER} is unreachable: {error}")
        pytest.skip(f"Redis at {BROKER} is unreachable")
    env = {**os.environ, "DATABASE_URL": _database_url(), "CELERY_BROKER_URL": BROKER,
           "LOG_LEVEL": "WARNING"}
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "benchsite", "worker", "-Q", "cpu", "-c", "1",
         "--without-gossip", "--without-mingle", "--without-heartbeat", "-n",
         f"test{os.getpid()}@%h", "--loglevel", "WARNING"],
        cwd=ROOT, env=env,
    )
    saved = {key: app.conf[key] for key in ("task_always_eager", "broker_url")}
    _reconnect(app, task_always_eager=False, broker_url=BROKER)
    try:
        yield worker
    finally:
        _reconnect(app, **saved)
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


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
