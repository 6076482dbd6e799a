"""Change detectors scored on the labelled synthetic series, the alert stream as deployed,
and the detector timed on 10,000 series.

    .venv/bin/python perf/detectors.py [--data fixtures/regressions/labelled.jsonl.gz]
        [--series 10000] [--points 365] [--admin-url postgres://postgres@127.0.0.1:5432/postgres]
        [--bench-db benchsite_detect_bench] [--no-db] [--nights-per-upload 1] [--quick]

The labelled series (fixtures/regressions/generate.py: 660 series of 240 nights, steps of
2-30 % up and down, noise 0.5-5 %, drifts, outliers, missing nights) are one metric whose
better direction is known, as every deployed series' is: a time in ms, lower is better, so
a step up is a regression and a step down an improvement.

Each detector alone sees each series once and reports when each alert would have been
raised online: the default change-point detector, the HUD policy in the metric's direction
(as detection runs it, on the same point values), Conbench's lookback z-score and the 5 %
previous-point rule.

The deployed stream is what the site records: the series are uploaded night by night
through the upload API (`POST /api/v3/results`) into a scratch database, detection runs
after each upload as deployed (inline, the default `DetectionSettings`: every detector
combined by `benchsite.regressions.detection` exactly as on the site, the last 200 points
of history, matching, alignment and groups), and every record it made is an alert, at the
night of its first bad point, raised on the night of the upload whose detection made it
(its `detected_at` may say earlier: a record made from a later upload's history says when
that history would have raised it). All series are in one repo, as the issue uploaded
them; each is its own benchmark, so a night without a series' value is that benchmark not
run (not a "missing metric" alert). Then the records are set against the change-point
detector's own placements on each whole series: at the same night, 1-3 nights off (moved
by alignment, or placed differently from a shorter history), or with no change point near.

Scoring, per noise band (noise <= 2 %, <= 5 %), in four views:
- every change: a step of 5 % or more, up or down, is found by an alert whose first bad
  point is the step's first point or up to 5 points after it (an improvement's record finds
  a step down);
  every other alert is false: placed before the step or later, on 2 % steps, drifts,
  outliers or noise, and a second alert for one step (counted as a duplicate as well when
  it is placed within 10 points of that step). The targets apply to this view.
- regressions only (what is notified): steps up are the changes to find, and only the
  alerts that say "worse" count (records of the regression kind; the HUD policy's findings;
  alerts of the other detectors whose level went up).
- every change, either side: as the first, but an alert placed up to 5 points before a step
  finds it too: the symmetric margin of published change-point scores (van den Burg and
  Williams' TCPDBench, F1 with a margin of 5). An alert placed a night or two early puts
  the culprit outside its commit range as surely as one placed late, so the first view
  stays the one the targets apply to; this one says how much of the gap is placement.
- culprit in range: as the first, and the alert's commit range, from its last good point
  (excluded) to its first bad point, holds the step's first point and at most 6 points:
  what a bisection of the range needs. A change point's range is the likelihood interval
  of its place (`changepoint.LIKELIHOOD_INTERVAL`), one point where the step is clear; the
  other detectors' ranges are one point.
The delay of a hit is the number of points at the new level when it was raised (1: on the
first). Targets for the deployed stream: F1 >= 0.97 at noise <= 2 %, >= 0.92 at <= 5 %; the
script exits with status 1 when it misses them (not with --quick, whose subset is too small
for the figures to mean much).

Then (unless --quick) times the default detector (with the per-point summaries it needs)
on --series synthetic series of --points points, in this process: on arrays, and (unless
--no-db) the production path, which reads each series' history from PostgreSQL (one query
per 1,000 series), runs both detectors and records what they find, printed with its phases
(target: under 30 s on 10,000 x 365).

The deployed stream and the timing need the database `--bench-db` (default
`benchsite_detect_bench`), which is recreated first; with --no-db, the deployed stream runs
on a temporary SQLite file instead (the site's other database; history is then read through
the ORM) and the database-backed timing is skipped. --quick: 132 series (2 of each kind,
step size, direction and noise), no timing.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchsite.comparison import points  # noqa: E402
from benchsite.regressions.detect import (  # noqa: E402
    Detection,
    changepoint,
    hud_policy,
    reference_detectors,
)
from runner.contract.directions import LOWER  # noqa: E402

BENCH_DB = "benchsite_detect_bench"
MIN_STEP = 0.05
WITHIN = 5  # points after a step's first point where an alert still finds it
DUPLICATE_WITHIN = 10  # a further alert this near a step is a second alert for it
GROUPS = (("noise <= 2%", 0.02), ("noise <= 5%", 0.05))
TARGETS = {"noise <= 2%": 0.97, "noise <= 5%": 0.92}
VIEWS = ("every change", "regressions only", "every change, either side", "culprit in range")
DEPLOYED = "deployed stream"
# The metric of every labelled series: lower is better (runner.contract.directions infers
# it from the name and unit, as it does for the site's series).
METRIC, UNIT, DIRECTION = "Quantized Fwd Time (ms)", "ms", LOWER
REPO, BRANCH, ARCH = "bench/labelled", "main", "NVIDIA H100 80GB HBM3"
START, DAY = 1_760_000_000, 86_400  # night 0 (Unix seconds), a night
QUICK_PER_CELL = 2


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

    def target_in(self, view: str) -> int | None:
        """The step to find in a view: regressions only are steps up (lower is better)."""
        if view == VIEWS[1] and self.magnitude <= 0:
            return None
        return self.target

    @property
    def repetitions(self) -> int:
        return int(np.isfinite(self.matrix).sum(axis=1).max())


@dataclass(frozen=True)
class Alert:
    index: int  # night of the first bad point
    detected_at: int  # night it was raised
    worse: bool  # says the series got worse (a regression)
    last_good: int | None = None  # night of the last good point (None: the one before index)


def load(path: Path) -> list[Series]:
    series = []
    with gzip.open(path, "rt") as lines:
        for line in lines:
            item = json.loads(line)
            reps = [row or [] for row in item["values"]]
            series.append(Series(item["id"], item["noise"], item["kind"], item["change"],
                                 item["magnitude"], points.as_matrix(reps)))
    return series


def quick_subset(series: list[Series]) -> list[Series]:
    """The first QUICK_PER_CELL series of each label (noise, kind, step size and sign)."""
    return [item for item in series if int(item.id.rsplit("-", 1)[1]) <= QUICK_PER_CELL]


def _alerts(found: list[Detection], all_worse: bool = False) -> list[Alert]:
    # Lower is better: a level that went up is worse.
    return sorted((Alert(d.index, d.detected_at, all_worse or d.after > d.before,
                         d.last_good) for d in found), key=lambda alert: alert.detected_at)


DETECTORS: dict[str, Callable[[Series], list[Alert]]] = {
    "change point (default)":
        lambda s: _alerts(changepoint.detect(s.values, noise_floor=s.floor)),
    # As detection runs it: the metric's direction, the point values, default windows and
    # the tolerance of times (5 %). Every finding of it says "worse".
    "HUD policy (its direction)":
        lambda s: _alerts(hud_policy.scan(s.values, DIRECTION), all_worse=True),
    "z-score (Conbench)": lambda s: _alerts(reference_detectors.zscore(s.best)),
    "previous point 5%": lambda s: _alerts(reference_detectors.previous_point(s.medians)),
}


@dataclass
class Score:
    hits: int = 0
    alerts: int = 0
    changes: int = 0
    duplicates: int = 0
    delays: list[int] = field(default_factory=list)

    def add(self, other: Score) -> None:
        self.hits += other.hits
        self.alerts += other.alerts
        self.changes += other.changes
        self.duplicates += other.duplicates
        self.delays += other.delays

    @property
    def false(self) -> int:
        return self.alerts - self.hits

    @property
    def recall(self) -> float:
        return self.hits / self.changes if self.changes else 1.0

    def figures(self) -> tuple[float, float, float, float, float]:
        precision = self.hits / self.alerts if self.alerts else 1.0
        recall = self.recall
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        delays = np.array(self.delays or [np.nan])
        return precision, recall, f1, float(np.median(delays)), float(np.percentile(delays, 90))


def score(series: Series, alerts: list[Alert], view: str = VIEWS[0]) -> Score:
    if view == VIEWS[1]:
        alerts = [alert for alert in alerts if alert.worse]
    result = Score(alerts=len(alerts))
    target = series.target_in(view)
    if target is None:
        return result
    result.changes = 1
    position = np.cumsum(np.isfinite(series.values)) - 1  # night -> index among present points
    earliest = -WITHIN if view == VIEWS[2] else 0
    hit = None
    for number, alert in enumerate(alerts):  # in the order they were raised
        offset = position[alert.index] - position[target]
        if view == VIEWS[3]:
            good = alert.index - 1 if alert.last_good is None else alert.last_good
            after_good = position[target] - (position[good] if good >= 0 else -1)
            found = 0 <= offset <= WITHIN and 1 <= after_good <= WITHIN + 1 - offset
        else:
            found = earliest <= offset <= WITHIN
        if found:
            delay = position[alert.detected_at] - position[target] + 1
            result.hits, result.delays, hit = 1, [int(delay)], number
            break
    if hit is not None:
        result.duplicates = sum(
            1 for number, alert in enumerate(alerts) if number != hit
            and abs(position[alert.index] - position[target]) <= DUPLICATE_WITHIN)
    return result


def five_at_five(item: Series) -> bool:
    """A 5 % step (either way) in a series of 5 % noise."""
    return item.kind == "step" and item.noise == 0.05 and abs(abs(item.magnitude) - 0.05) < 1e-9


Table = dict[str, dict[str, dict[str, Score]]]  # detector -> view -> group -> score


def evaluate(series: list[Series], alerts: dict[str, dict[str, list[Alert]]]) -> Table:
    """`alerts`: detector -> series id -> its alerts."""
    table: Table = {}
    for name, found in alerts.items():
        table[name] = {view: {group: Score() for group, _ in GROUPS} | {"5% at 5%": Score()}
                       for view in VIEWS}
        for item in series:
            for view in VIEWS:
                scored = score(item, found.get(item.id, []), view)
                for group, limit in GROUPS:
                    if item.noise <= limit + 1e-9:
                        table[name][view][group].add(scored)
                if five_at_five(item):
                    table[name][view]["5% at 5%"].add(scored)
    return table


def run_detectors(series: list[Series]) -> dict[str, dict[str, list[Alert]]]:
    return {name: {item.id: detector(item) for item in series}
            for name, detector in DETECTORS.items()}


def print_table(table: Table, count: int) -> None:
    groups = [group for group, _ in GROUPS]
    print(f"{count} labelled series (lower is better); a step of >= {MIN_STEP:.0%} is found by "
          f"an alert whose first bad point is on it or up to {WITHIN} points after it; every "
          "other alert is a "
          f"false alarm\n(dup: a false alarm within {DUPLICATE_WITHIN} points of a step "
          "already found, a second alert for it; P precision, R recall; delay: points at "
          "the new level when raised, median/p90; R 5/5: recall on 5% steps at 5% noise)")
    width = 26
    for view in VIEWS:
        print(f"\n{view}: " + {
            VIEWS[0]: "steps up and down, every alert",
            VIEWS[1]: "steps up, alerts that say worse",
            VIEWS[2]: f"as the first, an alert placed up to {WITHIN} points before a step "
                      "finds it too (TCPDBench's margin)",
            VIEWS[3]: "as the first, and the alert's range from its last good to its first "
                      f"bad point holds the step's first point and at most {WITHIN + 1} "
                      "points (the culprit is in its commit range)"}[view])
        header = f"{'detector':<{width}}" + "".join(f" | {g:^45}" for g in groups)
        print(header + " | R 5/5")
        print(f"{'':<{width}}" + " | {:>6} {:>6} {:>6} {:>7} {:>5} {:>4} {:>4}".format(
            "P", "R", "F1", "delay", "alerts", "FA", "dup") * len(groups))
        print("-" * (len(header) + 8))
        for name, views in table.items():
            cells = []
            for group in groups:
                found = views[view][group]
                p, r, f1, median, p90 = found.figures()
                cells.append(f" | {p:6.3f} {r:6.3f} {f1:6.3f} {median:3.0f}/{p90:<3.0f} "
                             f"{found.alerts:5d} {found.false:4d} {found.duplicates:4d}")
            five = views[view]["5% at 5%"]
            print(f"{name:<{width}}" + "".join(cells)
                  + f" | {five.recall:.2f} ({five.hits}/{five.changes})")
        first = next(iter(table.values()))[view]
        print("steps to find: " + ", ".join(f"{g}: {first[g].changes}" for g in groups)
              + f", 5% steps at 5% noise: {first['5% at 5%'].changes}")


def check_targets(table: Table) -> bool:
    """The targets on the first view (the exit status); the either-side view is printed
    beside it for comparison with published change-point scores."""
    met = True
    for group, target in TARGETS.items():
        f1, either = (table[DEPLOYED][view][group].figures()[2] for view in (VIEWS[0], VIEWS[2]))
        ok = f1 >= target - 1e-12
        met &= ok
        print(f"target {group}: deployed stream F1 {f1:.3f} >= {target:.2f}: "
              f"{'met' if ok else 'MISSED'} (either side of the step: {either:.3f})")
    return met


# The deployed stream: uploads through the API into a scratch database, detection as
# deployed after each.

def setup_django(url: str) -> None:
    """Point Django at `url` (before anything imports the settings) and migrate it."""
    os.environ.update(DATABASE_URL=url, LOG_LEVEL="WARNING", BENCH_DETECT_ON_UPLOAD="true")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    import django
    from django.core.management import call_command

    django.setup()
    from benchsite.celery import app

    # Detection inline after each upload, as the tests run tasks: the site's settings queue
    # them for a worker (none here), which left the deployed stream without records.
    app.conf.task_always_eager = True
    call_command("migrate", verbosity=0)


def recreate_postgres(admin_url: str, name: str = BENCH_DB) -> str:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name}")
    return admin_url.rsplit("/", 1)[0] + "/" + name


def _record(item: Series, night: int, reps: list[float], repo: str) -> dict:
    return {
        "repo": repo, "head_branch": BRANCH,
        "head_sha": hashlib.sha1(f"night {night}".encode()).hexdigest(),
        "workflow_id": 1000 + night, "run_attempt": 1, "job_id": night, "name": "nightly",
        "timestamp": START + night * DAY,
        "benchmark": {"name": f"labelled {item.id}", "mode": "inference", "dtype": "bf16",
                      "extra_info": {"device": "cuda", "arch": ARCH}},
        "model": {"name": item.id, "type": "synthetic series", "origins": ["labelled"]},
        "metric": {"name": METRIC, "benchmark_values": reps, "extra_info": {"unit": UNIT}},
        "runners": [{"name": "cuda", "type": ARCH}],
    }


def deployed_alerts(series: list[Series], nights_per_upload: int = 1,
                    repo: Callable[[Series], str] = lambda item: REPO,
                    ) -> tuple[dict[str, list[Alert]], dict[str, object]]:
    """Upload the series night by night (`nights_per_upload` nights an upload) through the
    API, detection running after each upload as deployed; then every record of the repo as
    an alert, by series id, and what was counted on the way."""
    import orjson
    from django.test import Client

    from benchsite.regressions.models import DetectionSettings, Regression
    from benchsite.results.models import UploadToken

    repos = {item.id: repo(item) for item in series}
    token = UploadToken(name="labelled", repos=sorted(set(repos.values())))
    secret = token.issue()
    token.save()
    client = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {secret}")
    settings = DetectionSettings.load()
    nights = len(series[0].matrix)
    started = time.perf_counter()
    uploads = 0
    began: list[tuple[datetime, int]] = []  # (when an upload was sent, its last night)
    for first in range(0, nights, nights_per_upload):
        began.append((datetime.now(UTC), min(nights, first + nights_per_upload) - 1))
        records = [_record(item, night, [float(v) for v in row[np.isfinite(row)]],
                           repos[item.id])
                   for night in range(first, min(nights, first + nights_per_upload))
                   for item in series
                   for row in [item.matrix[night]] if np.isfinite(row).any()]
        response = client.post("/api/v3/results", orjson.dumps(records),
                               content_type="application/json")
        if response.status_code != 201:
            raise RuntimeError(f"upload of night {first}: {response.status_code} "
                               f"{response.content[:500]!r}")
        uploads += 1
    elapsed = time.perf_counter() - started

    def night(moment) -> int:
        return round((moment.timestamp() - START) / DAY)

    def raised(created_at) -> int:
        """The last night of the upload whose detection made a record."""
        return next(last for when, last in reversed(began) if when <= created_at)

    found: dict[str, list[Alert]] = {}
    detectors: Counter[str] = Counter()
    with_hud = late = 0
    rows = (Regression.objects.filter(series__repo__in=set(repos.values()),
                                      series__model__in=list(repos))
            .values_list("series__model", "detector", "kind", "first_bad_at", "detected_at",
                         "created_at", "evidence", "last_good_at").order_by("created_at", "id"))
    for model, detector, kind, first_bad_at, detected_at, created_at, evidence, good in rows:
        # Raised on the night of the upload that made it (`detected_at` says when it would
        # have been, from the history that upload's detection read).
        found.setdefault(model, []).append(Alert(
            night(first_bad_at), raised(created_at), kind == Regression.Kind.REGRESSION,
            night(good) if good is not None else None))
        detectors[detector] += 1
        with_hud += "first_bad_at" in (evidence or {}).get("hud_policy", {})
        late += night(detected_at) < raised(created_at) - (nights_per_upload - 1)
    stats = {"uploads": uploads, "seconds": elapsed, "by detector": dict(detectors),
             "hud evidence": with_hud, "late": late,
             "history points": settings.history_points,
             "hud raises": [row.metric for row in settings.thresholds.all() if row.hud_raises]}
    return found, stats


def placements(series: list[Series], alone: dict[str, list[Alert]],
               deployed: dict[str, list[Alert]]) -> Counter[str]:
    """Where the deployed records are, against the change-point detector's own placements
    on the whole series: the same night, 1-3 nights off (the matching tolerance, within
    which alignment moves a record), or no change point near."""
    counts: Counter[str] = Counter()
    for item in series:
        own = [alert.index for alert in alone.get(item.id, [])]
        for alert in deployed.get(item.id, []):
            gap = min((abs(alert.index - index) for index in own), default=None)
            counts["at the change point's own night" if gap == 0 else
                   "1-3 nights off it" if gap is not None and gap <= 3 else
                   "with no change point within 3 nights"] += 1
    return counts


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


def time_database(matrices: list[np.ndarray]) -> tuple[float, int, dict[str, float]]:
    """Store the series in the (set up) database, then time the production path on all of
    them (`detect_series`, 1,000 series a part, as `detect_regressions` runs it): in
    total, and its phases (waiting for histories: the reading that did not overlap the
    detection of the previous part; change points on arrays; the rest is the HUD policy,
    matching and writing records and baselines)."""
    from benchsite.regressions import detection
    from benchsite.regressions.models import DetectionSettings

    series_ids = _store(matrices)
    settings = DetectionSettings.load()
    settings.history_points = matrices[0].shape[0]  # all of each series (default: the last 200)
    phases = {"waiting for histories": 0.0, "change points": 0.0}

    def timed(phase: str, function: Callable) -> Callable:
        def run(*args, **kwargs):
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                phases[phase] += time.perf_counter() - started
        return run

    def waited(parts: Iterator) -> Iterator:
        while True:
            started = time.perf_counter()
            part = next(parts, None)
            phases["waiting for histories"] += time.perf_counter() - started
            if part is None:
                return
            yield part

    originals = detection.recent_in_parts, detection._changepoints
    detection.recent_in_parts = lambda *args: waited(originals[0](*args))
    detection._changepoints = timed("change points", detection._changepoints)
    try:
        started = time.perf_counter()
        created = len(detection.detect_series(series_ids, "main", settings, part=1000))
        elapsed = time.perf_counter() - started
    finally:
        detection.recent_in_parts, detection._changepoints = originals
    phases["HUD policy, records, baselines"] = elapsed - sum(phases.values())
    return elapsed, created, phases


def _store(matrices: list[np.ndarray]) -> list[int]:
    from datetime import timedelta

    from django.db import connection

    from benchsite.results.models import Run, Series, Upload
    from benchsite.results.partitions import ensure_months

    upload = Upload.objects.create(content_hash="detector benchmark", payload_gzip=b"")
    start = datetime(2025, 1, 1, 3, tzinfo=UTC)
    length = matrices[0].shape[0]
    runs = Run.objects.bulk_create(
        Run(identity=f"run {night}", repo="bench/detect", head_branch="main",
            head_sha=f"{night:040x}", timestamp=start + timedelta(days=night),
            last_timestamp=start + timedelta(days=night), device="cuda", arch="bench GPU",
            upload=upload) for night in range(length))
    series = Series.objects.bulk_create(
        (Series(identity=f"series {number}", repo="bench/detect", benchmark="detect",
                model=f"model {number}", metric="Quantized Fwd Time (ms)", device="cuda",
                arch="bench GPU") for number in range(len(matrices))), batch_size=5000)
    times = [f"{run.pk}\t{upload.pk}\t{run.timestamp.isoformat()}" for run in runs]
    # In their months' partitions, as ingestion writes them (not in DEFAULT).
    ensure_months(connection, (int(run.timestamp.timestamp()) for run in runs))
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path,
                        default=ROOT / "fixtures" / "regressions" / "labelled.jsonl.gz")
    parser.add_argument("--series", type=int, default=10_000)
    parser.add_argument("--points", type=int, default=365)
    parser.add_argument("--admin-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--bench-db", default=BENCH_DB,
                        help="the scratch PostgreSQL database (dropped and recreated)")
    parser.add_argument("--no-db", action="store_true",
                        help="no PostgreSQL: the deployed stream on a temporary SQLite file, "
                        "no database-backed timing")
    parser.add_argument("--nights-per-upload", type=int, default=1,
                        help="nights of results in one upload (detection runs after each)")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_PER_CELL} series of each label, no timing, targets "
                        "printed but not enforced")
    args = parser.parse_args()

    series = load(args.data)
    if args.quick:
        series = quick_subset(series)
    started = time.perf_counter()
    alerts = run_detectors(series)
    print(f"(detectors alone on arrays: {time.perf_counter() - started:.1f} s)")

    with tempfile.TemporaryDirectory() as scratch:
        if args.no_db:
            url = f"sqlite:///{Path(scratch) / 'detect.sqlite3'}"
        else:
            url = recreate_postgres(args.admin_url, args.bench_db)
        setup_django(url)
        alerts[DEPLOYED], stats = deployed_alerts(series, args.nights_per_upload)
        print(f"(deployed stream: {stats['uploads']} uploads of {args.nights_per_upload} "
              f"night(s) through POST /api/v3/results into {url.split(':')[0]}, detection "
              f"after each: {stats['seconds']:.0f} s; records by detector "
              f"{stats['by detector']}, {stats['hud evidence']} "
              f"carrying the HUD policy's finding of the same change; default settings: "
              f"{stats['history points']} history points, HUD raises for "
              f"{stats['hud raises'] or 'no metric'})")
        where = placements(series, alerts["change point (default)"], alerts[DEPLOYED])
        print("(deployed records against the change point alone on each whole series: "
              + ", ".join(f"{count} {label}" for label, count in where.items())
              + f"; {stats['late']} raised on a later night than their detected_at says)\n")
        table = evaluate(series, alerts)
        print_table(table, len(series))
        print()
        met = check_targets(table)

        if not args.quick:
            matrices = synthetic(args.series, args.points)
            print(f"\n{args.series:,} series x {args.points} points, 3 repetitions each, a "
                  f"10 % step in half of them; {os.cpu_count()} cores, one process "
                  "(target: the production path under 30 s)")
            elapsed, found = time_detection(matrices)
            print(f"  change point on arrays:               {elapsed:5.1f} s "
                  f"({args.series / elapsed:,.0f} series/s, {found:,} changes)")
            if not args.no_db:
                elapsed, created, phases = time_database(matrices)
                print(f"  production path (PostgreSQL, both detectors, records): "
                      f"{elapsed:5.1f} s ({args.series / elapsed:,.0f} series/s, {created:,} "
                      "regressions recorded; "
                      + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in phases.items())
                      + ")")
        from django.db import connections

        connections.close_all()
    if args.quick:
        print("(--quick: targets not enforced)")
        return 0
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
