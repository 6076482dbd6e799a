"""Change detectors scored on the labelled synthetic series, and timed on 10,000 series.

    .venv/bin/python perf/detectors.py [--data fixtures/regressions/labelled.jsonl.gz]
        [--series 10000] [--points 365] [--admin-url postgres://postgres@127.0.0.1:5432/postgres]
        [--no-db]

Runs the default change-point detector, the HUD policy, Conbench's lookback z-score and the
5 % previous-point rule on every labelled series (see fixtures/regressions/generate.py) and
prints precision, recall, F1 and detection delay for noise up to 2 % and up to 5 %, side by
side. Scoring: a step of 5 % or more is found by an alert that places the change on its
first point or up to 5 points after it; every other alert is false (alerts placed before
a step or later, on 2 % steps, drifts, outliers or noise, and a second alert for one step).
The delay of a hit is the number of points at the new level when it was raised (1: on the
first). Detectors
see each series once and report when each alert would have been raised online. Steps go up
and down and the series' better direction is not given, so the HUD policy is run both ways.

Then times the default detector (with the per-point summaries it needs) on --series
synthetic series of --points points, in this process: on arrays, and (unless --no-db) the
production path, which reads each series' history from PostgreSQL (one query per 1,000
series), runs both detectors and records what they find. That needs the database
`benchsite_detect_bench`, which it recreates and fills with the same series first (not timed).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchsite.regressions.detect import (  # noqa: E402
    Detection,
    baselines,
    changepoint,
    hud_policy,
    points,
)
from runner.contract.directions import HIGHER, LOWER  # noqa: E402

BENCH_DB = "benchsite_detect_bench"
MIN_STEP = 0.05
WITHIN = 5
GROUPS = (("noise <= 2%", 0.02), ("noise <= 5%", 0.05))


@dataclass
class Series:
    id: str
    noise: float
    kind: str
    change: int | None
    magnitude: float
    matrix: np.ndarray  # (nights, repetitions), NaN rows for missing nights
    values: np.ndarray = field(init=False)  # trimmed means, NaN when missing
    medians: np.ndarray = field(init=False)
    best: np.ndarray = field(init=False)
    floor: float = field(init=False)

    def __post_init__(self) -> None:
        self.values, self.floor = points.summarize(self.matrix)
        present = ~np.isnan(self.matrix).all(axis=1)
        self.medians = np.full(len(self.matrix), np.nan)
        self.medians[present] = np.nanmedian(self.matrix[present], axis=1)
        self.best = np.full(len(self.matrix), np.nan)  # lower is better: the minimum
        self.best[present] = np.nanmin(self.matrix[present], axis=1)

    @property
    def target(self) -> int | None:
        """Night of the first present point at the new level, for a step worth finding."""
        if self.kind != "step" or abs(self.magnitude) < MIN_STEP - 1e-9:
            return None
        present = np.flatnonzero(np.isfinite(self.values))
        return int(present[present >= self.change][0])


def load(path: Path) -> list[Series]:
    series = []
    with gzip.open(path, "rt") as lines:
        for line in lines:
            item = json.loads(line)
            reps = [row or [] for row in item["values"]]
            series.append(Series(item["id"], item["noise"], item["kind"], item["change"],
                                 item["magnitude"], points.as_matrix(reps)))
    return series


DETECTORS: dict[str, Callable[[Series], list[Detection]]] = {
    "change point (default)": lambda s: changepoint.detect(s.values, noise_floor=s.floor),
    "HUD policy": lambda s: sorted(hud_policy.scan(s.medians, HIGHER)
                                   + hud_policy.scan(s.medians, LOWER),
                                   key=lambda d: d.detected_at),
    "z-score (Conbench)": lambda s: baselines.zscore(s.best),
    "previous point 5%": lambda s: baselines.previous_point(s.medians),
}


@dataclass
class Score:
    hits: int = 0
    alerts: int = 0
    changes: int = 0
    delays: list[int] = field(default_factory=list)

    def add(self, other: Score) -> None:
        self.hits += other.hits
        self.alerts += other.alerts
        self.changes += other.changes
        self.delays += other.delays

    def figures(self) -> tuple[float, float, float, float, float]:
        precision = self.hits / self.alerts if self.alerts else 1.0
        recall = self.hits / self.changes if self.changes else 1.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        delays = np.array(self.delays or [np.nan])
        return precision, recall, f1, float(np.median(delays)), float(np.percentile(delays, 90))


def score(series: Series, alerts: list[Detection]) -> Score:
    result = Score(alerts=len(alerts))
    target = series.target
    if target is None:
        return result
    result.changes = 1
    position = np.cumsum(np.isfinite(series.values)) - 1  # night -> index among present points
    for alert in alerts:
        offset = position[alert.index] - position[target]
        delay = position[alert.detected_at] - position[target] + 1
        if 0 <= offset <= WITHIN:
            result.hits, result.delays = 1, [int(delay)]
            break
    return result


def evaluate(series: list[Series]) -> dict[str, dict[str, Score]]:
    table: dict[str, dict[str, Score]] = {}
    for name, detector in DETECTORS.items():
        table[name] = {group: Score() for group, _ in GROUPS}
        for item in series:
            found = score(item, detector(item))
            for group, limit in GROUPS:
                if item.noise <= limit + 1e-9:
                    table[name][group].add(found)
    return table


def print_table(table: dict[str, dict[str, Score]], count: int) -> None:
    groups = [group for group, _ in GROUPS]
    print(f"{count} labelled series; a step of >= {MIN_STEP:.0%} is found by an alert placed on "
          f"it or up to {WITHIN} points after it\n(P precision, R recall; delay: points at the "
          "new level when raised, median/p90)\n")
    header = f"{'detector':<24}" + "".join(f" | {g:^34}" for g in groups)
    print(header)
    print(f"{'':<24}" + " | {:>6} {:>6} {:>6} {:>7} {:>5}".format(
        "P", "R", "F1", "delay", "alerts") * len(groups))
    print("-" * len(header))
    for name, scores in table.items():
        cells = []
        for group in groups:
            p, r, f1, median, p90 = scores[group].figures()
            cells.append(f" | {p:6.3f} {r:6.3f} {f1:6.3f} {median:3.0f}/{p90:<3.0f} "
                         f"{scores[group].alerts:5d}")
        print(f"{name:<24}" + "".join(cells))
    changes = {group: table[next(iter(table))][group].changes for group in groups}
    print("\nsteps to find: " + ", ".join(f"{g}: {n}" for g, n in changes.items()))


def synthetic(count: int, length: int, seed: int = 7) -> list[np.ndarray]:
    """Series of 3 repetitions per point, 1-3 % noise, a 10 % step in every other one."""
    rng = np.random.default_rng(seed)
    made = []
    for number in range(count):
        level = np.full(length, rng.uniform(1, 100))
        if number % 2:
            level[rng.integers(30, length - 10):] *= 1.1
        noise = rng.uniform(0.01, 0.03)
        made.append(level[:, None] * (1 + rng.normal(0, noise, (length, 3))))
    return made


def time_detection(matrices: list[np.ndarray]) -> tuple[float, int]:
    started = time.perf_counter()
    summaries = [points.summarize(matrix) for matrix in matrices]
    found = changepoint.detect_many([values for values, _ in summaries], changepoint.DEFAULT,
                                    [floor for _, floor in summaries])
    return time.perf_counter() - started, sum(map(len, found))


def time_database(matrices: list[np.ndarray], admin_url: str) -> tuple[float, int]:
    """Store the series in a fresh database, then time the production path on all of them."""
    import psycopg

    url = admin_url.rsplit("/", 1)[0] + "/" + BENCH_DB
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {BENCH_DB}")
        admin.execute(f"CREATE DATABASE {BENCH_DB}")
    env = {**os.environ, "DATABASE_URL": url}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env,
                   check=True)
    os.environ.update(DATABASE_URL=url, LOG_LEVEL="WARNING")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    import django

    django.setup()
    from benchsite.regressions.detection import detect_series
    from benchsite.regressions.models import DetectionSettings

    series_ids = _store(matrices)
    settings = DetectionSettings.load()
    settings.history_points = matrices[0].shape[0]  # all of each series (default: the last 200)
    started = time.perf_counter()
    created = sum(len(detect_series(series_ids[start : start + 1000], settings))
                  for start in range(0, len(series_ids), 1000))
    return time.perf_counter() - started, created


def _store(matrices: list[np.ndarray]) -> list[int]:
    from datetime import UTC, datetime, timedelta

    from django.db import connection

    from benchsite.results.models import Run, Series, Upload

    upload = Upload.objects.create(content_hash="detector benchmark", payload_gzip=b"")
    start = datetime(2025, 1, 1, 3, tzinfo=UTC)
    length = matrices[0].shape[0]
    runs = Run.objects.bulk_create(
        Run(identity=f"run {night}", repo="bench/detect", head_branch="main",
            head_sha=f"{night:040x}", timestamp=start + timedelta(days=night), device="cuda",
            arch="bench GPU", upload=upload) for night in range(length))
    series = Series.objects.bulk_create(
        (Series(identity=f"series {number}", repo="bench/detect", benchmark="detect",
                model=f"model {number}", metric="Quantized Fwd Time (ms)", device="cuda",
                arch="bench GPU") for number in range(len(matrices))), batch_size=5000)
    times = [f"{run.pk}\t{upload.pk}\t{run.timestamp.isoformat()}" for run in runs]
    with connection.cursor() as cursor:
        with cursor.cursor.copy(
                "COPY results_result (series_id, run_id, upload_id, timestamp, value, values) "
                "FROM STDIN") as copy:
            for item, matrix in zip(series, matrices, strict=True):
                medians = np.median(matrix, axis=1).tolist()
                copy.write("".join(
                    f"{item.pk}\t{when}\t{median!r}\t{{{','.join(map(repr, reps))}}}\n"
                    for when, median, reps in zip(times, medians, matrix.tolist(), strict=True)))
        cursor.execute("ANALYZE")
    return [item.pk for item in series]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path,
                        default=ROOT / "fixtures" / "regressions" / "labelled.jsonl.gz")
    parser.add_argument("--series", type=int, default=10_000)
    parser.add_argument("--points", type=int, default=365)
    parser.add_argument("--admin-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--no-db", action="store_true", help="skip the database-backed timing")
    args = parser.parse_args()

    series = load(args.data)
    started = time.perf_counter()
    print_table(evaluate(series), len(series))
    print(f"(scored in {time.perf_counter() - started:.1f} s)\n")

    matrices = synthetic(args.series, args.points)
    print(f"{args.series:,} series x {args.points} points, 3 repetitions each, a 10 % step in "
          f"half of them; {os.cpu_count()} cores, one process (target: under 60 s)")
    elapsed, found = time_detection(matrices)
    print(f"  change point on arrays:               {elapsed:5.1f} s "
          f"({args.series / elapsed:,.0f} series/s, {found:,} changes)")
    if not args.no_db:
        elapsed, created = time_database(matrices, args.admin_url)
        print(f"  production path (PostgreSQL, both detectors, records): {elapsed:5.1f} s "
              f"({args.series / elapsed:,.0f} series/s, {created:,} regressions recorded)")


if __name__ == "__main__":
    main()
