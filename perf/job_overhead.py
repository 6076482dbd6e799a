"""Per-cell scheduling overhead of benchmark jobs on real Celery workers.

    .venv/bin/python perf/job_overhead.py [--cells 24] [--workers 1 2]

Needs PostgreSQL and Redis on 127.0.0.1. It recreates the database
`benchsite_job_bench`, starts W worker processes (`celery worker -Q cpu -c 1`, as one per
GPU would be), submits a job of tiny CPU cells, and prints, per cell: the time from job
submitted to result stored, the time inside measured calls, and the difference (the
overhead: queueing, dispatch, claiming, building and quantizing the model, storing).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DB = "benchsite_job_bench"
BROKER = "redis://127.0.0.1:6379/14"
SPEC = """\
quantization_config_recipe_names: ["int8wo", "int8dq", "float8wo"]
output_dir: "var/job-bench"
model_params:
  - name: "tiny"
    matrix_shapes:
      - name: "custom"
        shapes: {shapes}
    high_precision_dtype: "torch.bfloat16"
    torch_compile_mode: false
    device: "cpu"
    model_type: "linear"
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=24, help="a multiple of 3")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()

    import psycopg
    import redis

    with psycopg.connect(args.admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")
    url = args.admin_url.rsplit("/", 1)[0] + f"/{DB}"
    env = {**os.environ, "DATABASE_URL": url, "CELERY_BROKER_URL": BROKER,
           "LOG_LEVEL": "WARNING"}
    os.environ.update(DATABASE_URL=url, CELERY_BROKER_URL=BROKER,
                      DJANGO_SETTINGS_MODULE="benchsite.settings")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env,
                   check=True)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from benchsite.jobs.models import Job
    from benchsite.jobs.submit import submit_job

    shapes = [[16 * (i + 1), 64, 64] for i in range(args.cells // 3)]
    spec = SPEC.format(shapes=shapes)
    print(f"{args.cells} cells per job (tiny CPU linear layers, 3 timed samples each)")
    for workers in args.workers:
        redis.Redis.from_url(BROKER).flushdb()
        procs = [subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "benchsite", "worker", "-Q", "cpu", "-c",
             "1", "-n", f"bench{n}@%h", "--without-gossip", "--without-mingle",
             "--without-heartbeat", "--loglevel", "WARNING"], cwd=ROOT, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for n in range(workers)]
        try:
            # A warm-up job, so worker start-up and imports are not counted.
            warm = submit_job(spec, name="warm-up", queue="cpu", via="command",
                              timing={"samples": 3, "warmup_s": 0.0, "min_sample_s": 0.0})
            wait(warm.pk, Job)
            job = submit_job(spec, name="bench", queue="cpu", via="command",
                             timing={"samples": 3, "warmup_s": 0.0, "min_sample_s": 0.0})
            job = wait(job.pk, Job)
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait()
        assert job.status == "succeeded", job.status
        cells = list(job.cells.select_related("upload"))
        measured = [c.measured_s for c in cells]
        overhead = [(c.upload.created_at - job.created_at).total_seconds() - c.measured_s
                    for c in cells]
        in_task = [(c.finished_at - c.started_at).total_seconds() - c.measured_s
                   for c in cells]
        gaps = []  # from the previous cell's end on the same worker (or submission) to start
        by_worker: dict[str, list] = {}
        for cell in cells:
            by_worker.setdefault(cell.worker, []).append(cell)
        for worker_cells in by_worker.values():
            worker_cells.sort(key=lambda c: c.started_at)
            previous = job.created_at
            for cell in worker_cells:
                gaps.append((cell.started_at - previous).total_seconds())
                previous = cell.finished_at
        wall = (job.finished_at - job.created_at).total_seconds()
        print(f"workers={workers}: job wall {wall:.2f} s for {len(cells)} cells, "
              f"{sum(measured):.2f} s inside measured calls")
        print(f"  overhead per cell, (wall x workers - measured) / cells: "
              f"{(wall * workers - sum(measured)) / len(cells):.3f} s")
        print(f"  in the task, outside measured calls (claim, model build and quantize, "
              f"records, store): p50 {statistics.median(in_task):.3f} s, "
              f"p95 {percentile(in_task, 0.95):.3f} s")
        print(f"  dispatch gap before a cell starts on its worker: "
              f"p50 {statistics.median(gaps) * 1000:.1f} ms, "
              f"p95 {percentile(gaps, 0.95) * 1000:.1f} ms")
        print(f"  submitted -> stored minus measured (includes queueing behind earlier "
              f"cells): p50 {statistics.median(overhead):.3f} s, "
              f"p95 {percentile(overhead, 0.95):.3f} s")


def wait(job_id: int, job_model, timeout: float = 600):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = job_model.objects.get(pk=job_id)
        if job.ended:
            return job
        time.sleep(0.05)
    raise SystemExit(f"job {job_id} did not end in {timeout} s")


if __name__ == "__main__":
    main()
