"""Uploads and a benchmark job under faults: database connections and a worker killed.

    .venv/bin/python perf/load_faults.py [--clients 8] [--uploads 100] [--seconds-between 3]

Needs PostgreSQL and Redis on 127.0.0.1. It recreates the database (`--database`, default
`benchsite_load_faults`), empties the broker's Redis database (`--broker`), serves the site
with gunicorn, starts a control worker (detection, and the sweeper every 2 s) and a CPU
worker, submits a job of short CPU cells, and lets N clients upload distinct payloads with
the CI client (`runner.cli.upload`: retries with the same Idempotency-Key). Meanwhile, every few
seconds, it terminates every server backend of the database (`pg_terminate_backend`: what a
database restart does to connections; PostgreSQL itself keeps running) and SIGKILLs the CPU
worker, in turn the whole worker and only its pool child, restarting what died. Then it
waits for the job to end and prints uploads sent / acknowledged / stored, lost, duplicated,
and cells or jobs stuck. Wanted: 0 lost, 0 duplicated, 0 stuck.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import psycopg
import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner.cli.upload import UploadError, upload_bytes  # noqa: E402

REPO = "load/faults"
RECORDS_PER_UPLOAD = 10
# The runs of the clients' uploads (the job's runs are in the same repo).
UPLOADED_RUNS = ("results_run r JOIN results_upload u ON u.id = r.upload_id "
                 "WHERE u.source = 'api' AND r.repo = %s")
# Orphaned after 3 s without a heartbeat, swept every 2 s: a kill costs seconds, not minutes.
FAST = {"BENCH_HEARTBEAT_INTERVAL": "1", "BENCH_HEARTBEAT_TIMEOUT": "3",
        "BENCH_SWEEP_INTERVAL": "2", "BENCH_DETECTION_RETRY_AFTER": "20"}
SPEC = """\
quantization_config_recipe_names: ["int8wo", "int8dq"]
output_dir: "var/load-faults"
model_params:
  - name: "tiny"
    matrix_shapes:
      - name: "custom"
        shapes: [[16, 64, 64], [32, 64, 64], [48, 64, 64], [64, 64, 64], [80, 64, 64]]
    high_precision_dtype: "torch.bfloat16"
    torch_compile_mode: false
    device: "cpu"
    model_type: "linear"
"""
# About two seconds a cell (8 blocks of 10 ms a pair), so that kills land inside cells.
SLOW_CELLS = {"min_pairs": 24, "max_pairs": 24, "warmup_s": 0.0, "min_sample_s": 0.01,
              "budget_s": 600}


def body(upload: int) -> bytes:
    return orjson.dumps([
        {"benchmark": {"name": "load faults", "mode": "inference", "dtype": "bfloat16",
                       "extra_info": {"device": "cpu"}},
         "model": {"name": f"layer-{record}", "type": "load"},
         "metric": {"name": "latency", "benchmark_values": [1.0 + upload / 1e4, 1.1],
                    "extra_info": {"unit": "ms"}}}
        for record in range(RECORDS_PER_UPLOAD)])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


class Workers:
    """The CPU worker (killed and restarted) and the control worker with the sweeper."""

    def __init__(self, env: dict):
        self.env = {**env, **FAST}
        self.control = self.start("control", "control", beat=True)
        self.cpu = self.start("cpu", "cpu")

    def start(self, name: str, queues: str, beat: bool = False) -> subprocess.Popen:
        command = [sys.executable, "-m", "celery", "-A", "benchsite", "worker", "-Q", queues,
                   "-c", "1", "-n", f"{name}{time.monotonic_ns()}@%h", "--without-gossip",
                   "--without-mingle", "--loglevel", "ERROR"]
        if beat:
            command += ["--beat", "--scheduler", "celery.beat:Scheduler", "--schedule",
                        f"/tmp/load-faults-beat-{os.getpid()}"]
        return subprocess.Popen(command, cwd=ROOT, env=self.env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def kill_cpu(self, whole: bool) -> str:
        if whole:
            os.killpg(self.cpu.pid, signal.SIGKILL)
            self.cpu.wait()
            self.cpu = self.start("cpu", "cpu")
            return "whole worker"
        children = children_of(self.cpu.pid)
        for child in children:
            os.kill(child, signal.SIGKILL)  # the worker starts a new pool child itself
        return f"{len(children)} pool child(ren)"

    def stop(self) -> None:
        for worker in (self.cpu, self.control):
            worker.terminate()
        for worker in (self.cpu, self.control):
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()


def chaos(stop: threading.Event, url: str, database: str, workers: Workers, every: float,
          tally: dict) -> None:
    whole = True
    while not stop.wait(every):
        with psycopg.connect(url, autocommit=True) as conn:
            terminated = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()", [database]).fetchone()[0]
        tally["backends terminated"] += terminated
        tally["database kills"] += 1
        if stop.wait(every / 2):
            break
        workers.kill_cpu(whole)
        tally["whole worker kills" if whole else "pool child kills"] += 1
        whole = not whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--uploads", type=int, default=100, help="per client")
    parser.add_argument("--seconds-between", type=float, default=3.0,
                        help="between one database kill and the next (a worker kill between)")
    parser.add_argument("--fault-seconds", type=float, default=60.0,
                        help="faults go on at least this long (and until the uploads end)")
    parser.add_argument("--settle", type=float, default=180.0,
                        help="seconds the job may take to end once the faults stop")
    parser.add_argument("--database", default="benchsite_load_faults")
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/12")
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()

    with psycopg.connect(args.admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {args.database} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {args.database}")
    url = args.admin_url.rsplit("/", 1)[0] + f"/{args.database}"
    redis.Redis.from_url(args.broker).flushdb()
    env = {**os.environ, "DATABASE_URL": url, "CELERY_BROKER_URL": args.broker,
           "DEBUG": "false", "SECRET_KEY": "load-faults", "ALLOWED_HOSTS": "127.0.0.1",
           "LOG_LEVEL": "ERROR", "BENCH_THROTTLE_TOKEN": "", "DATABASE_CONN_MAX_AGE": "600"}
    python = sys.executable
    subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    token = subprocess.run(
        [python, "manage.py", "create_upload_token", "--repo", REPO, "--scope", "upload",
         "--scope", "submit_jobs", "--queue", "cpu"],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout.strip()

    port = free_port()
    # The server's errors, counted at the end; open until the process exits.
    server_log = tempfile.TemporaryFile("w+")  # noqa: SIM115
    web = subprocess.Popen(
        [python, "-m", "gunicorn", "benchsite.wsgi", "--bind", f"127.0.0.1:{port}",
         "--workers", "3", "--timeout", "120", "--log-level", "error"], cwd=ROOT, env=env,
        stderr=server_log)
    server = f"http://127.0.0.1:{port}"
    workers = Workers(env)
    tally = {"database kills": 0, "backends terminated": 0, "whole worker kills": 0,
             "pool child kills": 0}
    stop = threading.Event()
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{server}/api/v3/jobs", timeout=5)
                break
            except OSError:
                time.sleep(0.2)
        job_id = submit_job(server, token)
        fault_thread = threading.Thread(
            target=chaos, args=(stop, args.admin_url, args.database, workers,
                                args.seconds_between, tally), daemon=True)
        fault_thread.start()
        started = time.monotonic()
        sent = args.clients * args.uploads
        with ThreadPoolExecutor(args.clients) as pool:
            answers = list(pool.map(lambda n: send(server, token, n), range(sent)))
        upload_seconds = time.monotonic() - started
        stop.wait(max(0.0, args.fault_seconds - upload_seconds))
        fault_seconds = time.monotonic() - started
        stop.set()
        fault_thread.join()
        settled_in = wait_for_job(url, job_id, args.settle)
        server_log.seek(0)
        server_errors = server_log.read().count("Internal Server Error")
        report(url, answers, sent, upload_seconds, fault_seconds, tally, job_id, settled_in,
               server_errors)
    finally:
        stop.set()
        workers.stop()
        web.terminate()
        web.wait()


def submit_job(server: str, token: str) -> int:
    request = urllib.request.Request(
        f"{server}/api/v3/jobs", method="POST",
        data=json.dumps({"spec": SPEC, "queue": "cpu", "repo": REPO, "name": "load-faults",
                         "timing": SLOW_CELLS}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())["id"]


def send(server: str, token: str, upload: int) -> tuple[int, bool, str]:
    """(upload, acknowledged, problem)."""
    metadata = {"repo": REPO, "head_branch": "main", "head_sha": f"{upload:040x}",
                "workflow_id": upload + 1, "timestamp": 1_760_000_000 + upload}
    try:
        upload_bytes(body(upload), server, token, metadata, retries=8, backoff=0.25,
                     timeout=60)
    except UploadError as error:
        return upload, False, str(error)
    return upload, True, ""


def wait_for_job(url: str, job_id: int, settle: float) -> float | None:
    """Seconds until the job ended once the faults stopped; None if it did not."""
    started = time.monotonic()
    while time.monotonic() - started < settle:
        with psycopg.connect(url) as conn:
            status = conn.execute("SELECT status FROM jobs_job WHERE id = %s",
                                  [job_id]).fetchone()[0]
        if status in ("succeeded", "partially_failed", "failed", "cancelled"):
            return time.monotonic() - started
        time.sleep(0.5)
    return None


def report(url: str, answers: list, sent: int, upload_seconds: float, fault_seconds: float,
           tally: dict, job_id: int, settled_in: float | None, server_errors: int) -> None:
    acknowledged = {upload + 1 for upload, ok, _ in answers if ok}
    with psycopg.connect(url) as conn:
        stored = {row[0] for row in conn.execute(
            f"SELECT workflow_id FROM {UPLOADED_RUNS}", [REPO])}
        uploads = conn.execute("SELECT count(*) FROM results_upload WHERE source = 'api'"
                               ).fetchone()[0]
        duplicate_runs = conn.execute(
            f"SELECT count(*) FROM (SELECT workflow_id FROM {UPLOADED_RUNS} "
            "GROUP BY workflow_id HAVING count(*) > 1) d", [REPO]).fetchone()[0]
        duplicate_results = conn.execute(
            "SELECT count(*) FROM (SELECT run_id, series_id FROM results_result "
            "GROUP BY run_id, series_id HAVING count(*) > 1) d").fetchone()[0]
        short_runs = conn.execute(
            f"SELECT count(*) FROM {UPLOADED_RUNS} AND result_count <> %s",
            [REPO, RECORDS_PER_UPLOAD]).fetchone()[0]
        cells = dict(conn.execute("SELECT status, count(*) FROM jobs_jobcell "
                                  "WHERE job_id = %s GROUP BY status", [job_id]).fetchall())
        reasonless = conn.execute(
            "SELECT count(*) FROM jobs_jobcell WHERE job_id = %s AND status = 'failed' "
            "AND error = ''", [job_id]).fetchone()[0]
        attempts = conn.execute("SELECT sum(attempts) FROM jobs_jobcell WHERE job_id = %s",
                                [job_id]).fetchone()[0]
        job = conn.execute("SELECT status FROM jobs_job WHERE id = %s", [job_id]).fetchone()[0]
        owed = conn.execute("SELECT count(*) FROM results_upload "
                            "WHERE detection_owed_at IS NOT NULL").fetchone()[0]
    failures = [problem for _, ok, problem in answers if not ok]
    print(f"faults over {fault_seconds:.1f} s ({upload_seconds:.1f} s of uploads): "
          + ", ".join(f"{count} {name}" for name, count in tally.items()))
    print(f"server answers 500 (a query on a terminated connection; the client retried): "
          f"{server_errors}")
    print(f"uploads: sent {sent}, acknowledged {len(acknowledged)}, stored {len(stored)} "
          f"(upload rows {uploads}), failed after retries {len(failures)}")
    print(f"lost (acknowledged, not stored): {len(acknowledged - stored)}; stored but not "
          f"acknowledged: {len(stored - acknowledged)}; partial runs: {short_runs}")
    print(f"duplicates: runs {duplicate_runs}, results {duplicate_results}")
    stuck = sum(count for status, count in cells.items() if status in ("pending", "running"))
    print(f"job {job_id}: {job}" + (f", ended {settled_in:.1f} s after the faults stopped"
                                     if settled_in is not None else ", NOT ended")
          + f"; cells {cells}, {attempts} attempts; stuck cells {stuck}, failed without a "
          f"reason {reasonless}")
    print(f"uploads still owing regression detection: {owed}")
    for problem in failures[:5]:
        print(f"  failed: {problem[:300]}")


if __name__ == "__main__":
    main()
