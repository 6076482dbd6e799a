"""Where one upload's time goes on the server, against a raw COPY of its own rows.

    .venv/bin/python perf/ingest_phases.py [--uploads 40] [--per-upload 5000]

In process (Django's test client posting to the upload API, the site set up as served by
importing `benchsite.wsgi`), on a PostgreSQL database it recreates (`benchsite_ingest_phases`;
--database to change; --admin-url for the server). Each upload (torchao-style records as
`perf/ingest_api.py` makes them, gzip and idempotency key from the CI client) is split into:

- before the COPY: from the request to its first result row sent (token, rate limit,
  gunzip, splitting the body, the first records read, the repeat check, the upload row with
  its payload, the run ids);
- the COPY: from its first row sent to the server's end of it; "Python done" is when every
  row had been sent (the rest of the phase is the server catching up);
- after the COPY: to the response (summaries, run totals, commit, queueing detection).

After each upload, its rows are COPYed again into the same table in a transaction rolled
back: a raw COPY of the same rows at the same table size, alternating with the uploads so
that a noisy machine's load falls on both. Prints the medians and two ratios: the COPY phase
over the raw COPY (how close the overlap of reading and writing comes to the server's own
speed) and the raw COPY over the whole request (`perf/ingest_api.py`'s API/COPY, an upload at
a time and without the client and HTTP; issue 35: >= 0.5).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import orjson
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "perf"))

from ingest_api import COLUMNS, copy_again, make_records, recreate  # noqa: E402

from runner.cli.upload import prepare  # noqa: E402

PHASES = ("before the COPY", "COPY", "  of it until Python done", "after the COPY", "request",
          "raw COPY of its rows")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uploads", type=int, default=40)
    parser.add_argument("--per-upload", type=int, default=5_000)
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--database", default="benchsite_ingest_phases")
    args = parser.parse_args()

    url = recreate(args.admin_url, args.database)
    os.environ.update(DATABASE_URL=url, DEBUG="false", SECRET_KEY="bench",
                      ALLOWED_HOSTS="testserver", LOG_LEVEL="WARNING",
                      BENCH_DETECT_ON_UPLOAD="false")
    python = sys.executable
    subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)
    token = subprocess.run([python, "manage.py", "create_upload_token", "--repo", "pytorch/ao"],
                           cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
    os.chdir(ROOT)
    from django.test import Client

    import benchsite.wsgi  # noqa: F401  (set up as served: URLconf, views, middleware)
    from benchsite.results.ingest import store

    marks: dict[str, float] = {}
    write, finish = store.CopyWriter.write, store.CopyWriter.finish

    def marked_write(writer, results):
        marks.setdefault("copy", time.perf_counter())
        return write(writer, results)

    def marked_finish(writer, meanwhile):
        marks["python done"] = time.perf_counter()
        value = finish(writer, meanwhile)
        marks["copy end"] = time.perf_counter()
        return value

    store.CopyWriter.write, store.CopyWriter.finish = marked_write, marked_finish

    client = Client()
    client.handler.load_middleware()
    runs = make_records(args.per_upload * (args.uploads + 2), args.per_upload)
    times: dict[str, list[float]] = {phase: [] for phase in PHASES}
    with psycopg.connect(url) as raw:
        for night, records in enumerate(runs):
            metadata = {"repo": "pytorch/ao", "head_branch": "main", "head_sha": f"{night:040x}",
                        "workflow_id": night, "timestamp": 1_760_000_000 + 3600 * night}
            prepared = prepare(orjson.dumps(records), "http://testserver", token, metadata)
            marks.clear()
            started = time.perf_counter()
            response = client.post(
                prepared.url.removeprefix("http://testserver"), data=prepared.compressed,
                content_type="application/json", HTTP_CONTENT_ENCODING="gzip",
                HTTP_AUTHORIZATION=prepared.headers["Authorization"],
                HTTP_IDEMPOTENCY_KEY=prepared.headers["Idempotency-Key"])
            answered = time.perf_counter()
            if response.status_code != 201:
                raise SystemExit(f"upload {night}: {response.status_code} {response.content[:300]}")
            if night < 2:  # the first uploads create the series and warm the caches
                continue
            times["before the COPY"].append(marks["copy"] - started)
            times["COPY"].append(marks["copy end"] - marks["copy"])
            times["  of it until Python done"].append(marks["python done"] - marks["copy"])
            times["after the COPY"].append(answered - marks["copy end"])
            times["request"].append(answered - started)
            upload_id = int(response.json()["upload_id"])
            times["raw COPY of its rows"].append(copy_again(
                raw, f"SELECT {COLUMNS} FROM results_result WHERE upload_id = {upload_id}"))
    medians = {phase: 1000 * statistics.median(values) for phase, values in times.items()}
    print(f"{args.uploads} uploads of {args.per_upload} records, medians:")
    for phase, median in medians.items():
        print(f"  {phase:<28} {median:7.1f} ms")
    print(f"COPY phase / raw COPY = {medians['COPY'] / medians['raw COPY of its rows']:.2f}; "
          f"raw COPY / request = {medians['raw COPY of its rows'] / medians['request']:.2f} "
          "(issue 35: >= 0.5)")


if __name__ == "__main__":
    main()
