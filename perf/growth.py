"""How page time, upload rate, detection time and storage grow with the results table.

    .venv/bin/python perf/growth.py [--sizes 1,3,10] [--admin-url URL] [--repeat 5]
                                    [--rounds 2] [--reuse] [--drop]

For each size (millions of results, smallest first) it recreates the PostgreSQL database
`benchsite_growth_SIZE` (`benchsite_growth_1`, `_3`, `_10`), migrates it and seeds it with
`manage.py seed_history --nights N`: the same generator as the 10M latency benchmark (a
year of nightly torchao, compiler, vLLM, kernel and instruction-count runs), N nights making
about that many results. On each database:

- storage: the results table's bytes (heap, TOAST and indexes; all partitions where it is
  partitioned) per result (goal: under 200 bytes), and the whole database's (the stored
  baselines, about one a result, the summaries, series and runs besides);
- one more night, stored as the workers and the API store it (`store_upload`, the rows of
  every job of that night) in a fresh process, as a worker's first uploads after a start
  (its caches cold): results per second; then detection over that night's runs
  (`detect_runs`, as the task after an upload runs it), in seconds: it reads each series'
  recent history, up to the detection settings' `history_points`, so it grows with the
  nights until they fill that (at 1M a series has 35 points, at 10M the default's 200).

Then, with every size seeded, the pages in --rounds rounds, each round visiting the sizes in
another order (a noisy minute of a shared machine falls on one size in one round, not on
one size in all), and each figure the median over the rounds:
- cold: each page's first request in a fresh process (`perf/dashboard_latency.py --cold
  --only PAGE`), what a user's first click after a deploy costs; target under 1 s;
- warm: every page's p95 over its filter combinations (`perf/dashboard_latency.py`);
  target under 200 ms.

The table puts the sizes side by side, with the slope: the largest size's figure over the
smallest's (a flat cost reads 1.0; the target for p95 is at most 1.5 from 1M to 10M).
Seeding takes about 90 s a million results on a 2-core machine. The databases are kept
(--drop drops them at the end); --reuse measures the pages and one more night again on
databases a previous run seeded (their storage as it is now; each measured night stays, 0.3%
more results at 10M), seeding only the sizes it lacks.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
RESULTS_A_NIGHT = 29_330  # seed_history's generator: 10.7M results over 365 nights
SEEDED = "perf_growth_seeded"  # a table of one row: what seeding measured (for --reuse)


def _env(url: str) -> dict[str, str]:
    return {**os.environ, "DATABASE_URL": url, "BENCH_DETECT_ON_UPLOAD": "false",
            "DEBUG": "false"}


def _database(size: float) -> str:
    return f"benchsite_growth_{size:g}".replace(".", "_")


def _conninfo(admin_url: str, size: float) -> str:
    return psycopg.conninfo.make_conninfo(admin_url, dbname=_database(size))


def _url(conninfo: str) -> str:
    params = psycopg.conninfo.conninfo_to_dict(conninfo)
    return (f"postgres://{params.get('user', 'postgres')}@{params.get('host', '127.0.0.1')}:"
            f"{params.get('port', 5432)}/{params['dbname']}")


def _recreate(admin_url: str, size: float, drop_only: bool = False) -> None:
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{_database(size)}" WITH (FORCE)')
        if not drop_only:
            admin.execute(f'CREATE DATABASE "{_database(size)}"')


def _seeded(conninfo: str) -> dict | None:
    """What an earlier run's seeding of this database measured; None if it did not finish
    (or the database does not exist)."""
    try:
        with psycopg.connect(conninfo) as db:
            row = db.execute(f"SELECT to_regclass('{SEEDED}')").fetchone()
            if row[0] is None:
                return None
            return json.loads(db.execute(f"SELECT figures FROM {SEEDED}").fetchone()[0])
    except psycopg.OperationalError:
        return None


def _storage(conninfo: str) -> dict:
    """The results, and bytes a result: of the results table (its partitions included) and
    of the whole database."""
    with psycopg.connect(conninfo) as db:
        results = max(db.execute("SELECT count(*) FROM results_result").fetchone()[0], 1)
        size = db.execute(  # a plain table is no partition tree
            "SELECT coalesce((SELECT sum(pg_total_relation_size(relid)) FROM "
            "pg_partition_tree('results_result')), pg_total_relation_size('results_result'))"
        ).fetchone()[0]
        database = db.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    return {"results": results, "bytes": float(size) / results,
            "database_bytes": float(database) / results}


def _pages(url: str, repeat: int) -> dict[str, dict]:
    """page -> {"cold": ms, "p95": ms}: warm figures from one run, each page's cold first
    request from a fresh process of its own."""
    with tempfile.TemporaryDirectory() as folder:
        warm_file = Path(folder, "warm.json")
        subprocess.run([PYTHON, "perf/dashboard_latency.py", "--repeat", str(repeat),
                        "--json", str(warm_file)], cwd=ROOT, env=_env(url), check=False,
                       stdout=subprocess.DEVNULL)
        pages = {row["page"]: {"p95": row["p95_ms"]} for row in json.loads(warm_file.read_text())}
        for page in [name for name in pages if not name.endswith((" JSON", " markdown"))]:
            cold_file = Path(folder, "cold.json")
            subprocess.run([PYTHON, "perf/dashboard_latency.py", "--cold", "--only", page,
                            "--json", str(cold_file)], cwd=ROOT, env=_env(url), check=False,
                           stdout=subprocess.DEVNULL)
            for row in json.loads(cold_file.read_text()):
                pages[row["page"]]["cold"] = row["first_ms"]
    return pages


def _one_more_night(nights: int) -> dict[str, float]:
    """In this process (Django set up on a database seeded with `nights` nights): store the
    next night's uploads, as a worker's first uploads after a start (its caches cold), and
    run detection over their runs. A CHECKPOINT first writes out what seeding left dirty,
    so that the night does not pay for it (stored a minute after seeding, without it, the
    10M night read half the 1M rate; measured later, with it, 0.7)."""
    from datetime import UTC, datetime, timedelta

    import django
    import orjson

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    django.setup()
    from django.db import connection

    from benchsite.regressions.detection import detect_runs
    from benchsite.regressions.models import DetectionSettings
    from benchsite.results.demo import LARGE, nightly_uploads
    from benchsite.results.ingest import store_upload
    from benchsite.results.models import Run, Upload

    end = Run.objects.latest("timestamp").timestamp.astimezone(UTC) + timedelta(days=1)
    bodies = [(metadata, orjson.dumps(batch)) for metadata, batch in
              nightly_uploads(LARGE, end=end, nights=nights + 1, only={nights})]
    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")
    records, started, uploads = 0, time.perf_counter(), []
    for metadata, body in bodies:
        stored = store_upload(body, metadata=metadata, source=Upload.Source.DEMO,
                              announce=False)
        records += stored.upload.record_count
        uploads.append(stored.upload.pk)
    rate = records / (time.perf_counter() - started)
    started = time.perf_counter()
    regressions = detect_runs(Run.objects.filter(upload_id__in=uploads).order_by("timestamp"))
    detected_in = time.perf_counter() - started
    return {"records": records, "rate": rate, "detection_s": detected_in,
            "history_points": min(nights + 1, DetectionSettings.load().history_points),
            "regressions": len(regressions), "at": datetime.now(UTC).isoformat()}


def _night(url: str, nights: int) -> dict[str, float]:
    done = subprocess.run([PYTHON, __file__, "--one-more-night", str(nights)], cwd=ROOT,
                          env=_env(url),
                          check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _seed(size: float, admin_url: str, reuse: bool) -> dict:
    """Seed the size's database (with `reuse`, unless an earlier run seeded it) and measure
    storage and one more night."""
    conninfo = _conninfo(admin_url, size)
    found = _seeded(conninfo) if reuse else None
    if found is not None:
        print(f"{size:g}M: reused {_database(size)} ({found['results']:,} results)", flush=True)
        with psycopg.connect(conninfo) as db:  # the seeded nights and those measured since
            nights = db.execute("SELECT count(DISTINCT timestamp::date) FROM results_run"
                                ).fetchone()[0]
        return {**found, **_storage(conninfo), "night": _night(_url(conninfo), nights)}
    _recreate(admin_url, size)
    url = _url(conninfo)
    nights = max(3, round(size * 1e6 / RESULTS_A_NIGHT))
    started = time.perf_counter()
    for command in (["migrate", "--no-input"], ["seed_history", "--nights", str(nights)]):
        subprocess.run([PYTHON, "manage.py", *command, "-v", "0"], cwd=ROOT, env=_env(url),
                       check=True, stdout=subprocess.DEVNULL)
    seeded_in = time.perf_counter() - started
    storage = _storage(conninfo)
    print(f"{size:g}M: {storage['results']:,} results over {nights} nights, seeded in "
          f"{seeded_in:.0f} s, {storage['bytes']:.0f} bytes a result "
          f"({storage['database_bytes']:.0f} of the whole database)", flush=True)
    figures = {"size": size, **storage, "night": _night(url, nights)}
    with psycopg.connect(conninfo) as db:
        db.execute(f"CREATE TABLE {SEEDED} (figures text)")
        db.execute(f"INSERT INTO {SEEDED} VALUES (%s)", [json.dumps(figures)])
    return figures


def _median_pages(rounds: list[dict[str, dict]]) -> dict[str, dict]:
    """Each page's cold and p95 figures, the median over the rounds that measured them."""
    pages: dict[str, dict] = {}
    for measured in rounds:
        for page, figures in measured.items():
            for name, value in figures.items():
                if value is not None:
                    pages.setdefault(page, {}).setdefault(name, []).append(value)
    return {page: {name: statistics.median(values) for name, values in figures.items()}
            for page, figures in pages.items()}


def _table(measured: list[dict]) -> None:
    def row(label: str, figures: list[float | None], fmt: str) -> None:
        cells = [format(value, fmt) if value is not None else "-" for value in figures]
        first, last = figures[0], figures[-1]
        slope = f"{last / first:.2f}" if first and last is not None else "-"
        print(f"{label:<28}" + "".join(f"{cell:>12}" for cell in cells) + f"{slope:>8}")

    print(f"\n{'':<28}" + "".join(f"{m['results'] / 1e6:>11.2f}M" for m in measured)
          + f"{'slope':>8}")
    row("bytes a result", [m["bytes"] for m in measured], ".0f")
    row("database bytes a result", [m["database_bytes"] for m in measured], ".0f")
    row("upload, results/s", [m["night"]["rate"] for m in measured], ".0f")
    row("detection of a night, s", [m["night"]["detection_s"] for m in measured], ".2f")
    row("  history points a series", [m["night"].get("history_points") for m in measured], ".0f")
    pages = list(measured[-1]["pages"])
    for page in pages:
        figures = [m["pages"].get(page, {}) for m in measured]
        if "cold" in figures[-1]:
            row(f"{page} cold ms", [f.get("cold") for f in figures], ".0f")
    for page in pages:
        row(f"{page} p95 ms", [m["pages"].get(page, {}).get("p95") for m in measured], ".1f")
    if not pages:
        return  # --rounds 0: seeded and measured the nights, no pages
    worst_cold = max(f.get("cold", 0) for f in measured[-1]["pages"].values())
    worst_p95 = max(f.get("p95", 0) for f in measured[-1]["pages"].values())
    print(f"at the largest size: worst cold {worst_cold:.0f} ms (target < 1000), worst p95 "
          f"{worst_p95:.1f} ms (target < 200)")


def main() -> int:
    if sys.argv[1:2] == ["--one-more-night"]:
        print(json.dumps(_one_more_night(int(sys.argv[2]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,3,10", help="millions of results, comma-separated")
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--repeat", type=int, default=5, help="warm requests a URL")
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds of page measurements over all sizes (medians)")
    parser.add_argument("--reuse", action="store_true",
                        help="keep the sizes an earlier run seeded, measure them again")
    parser.add_argument("--drop", action="store_true", help="drop the databases at the end")
    args = parser.parse_args()
    sizes = sorted(float(size) for size in args.sizes.split(","))
    measured = [_seed(size, args.admin_url, args.reuse) for size in sizes]
    rounds: dict[float, list] = {size: [] for size in sizes}
    for number in range(args.rounds):
        for size in sizes[number % len(sizes):] + sizes[:number % len(sizes)]:
            started = time.perf_counter()
            rounds[size].append(_pages(_url(_conninfo(args.admin_url, size)), args.repeat))
            print(f"round {number + 1}: {size:g}M pages measured in "
                  f"{time.perf_counter() - started:.0f} s", flush=True)
    for figures in measured:
        figures["pages"] = _median_pages(rounds[figures["size"]])
    _table(measured)
    if args.drop:
        for size in sizes:
            _recreate(args.admin_url, size, drop_only=True)
    else:
        print("kept: " + ", ".join(_database(size) for size in sizes)
              + " (--reuse measures them again, --drop drops them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
