"""Nightly histories stored through the upload path, for the regression tests."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import numpy as np
import orjson

from benchsite.regressions.models import AlertGroup, Regression, RegressionEvent
from benchsite.results.ingest import Stored, store_upload
from benchsite.results.models import Result, Run, Series, Upload

START = 1_760_000_000  # night 0, Unix seconds
DAY = 86_400
H100 = "NVIDIA H100 80GB HBM3"
TIME = ("Quantized Fwd Time (ms)", "ms")
SPEEDUP = ("Fwd Speedup (x)", "x")


def sha(night: int) -> str:
    return hashlib.sha1(f"night {night}".encode()).hexdigest()


def record(model: str, values: list[float], metric: tuple[str, str] = TIME,
           benchmark: str = "micro-benchmark api", arch: str = H100) -> dict:
    name, unit = metric
    return {
        "benchmark": {"name": benchmark, "mode": "inference", "dtype": "int8dq",
                      "extra_info": {"device": "cuda", "arch": arch}},
        "model": {"name": model, "type": "micro-benchmark custom layer",
                  "origins": ["torchao"]},
        "metric": {"name": name, "benchmark_values": values, "extra_info": {"unit": unit}},
        "runners": [{"name": "cuda", "type": arch}],
    }


def with_torch(found: dict, torch: str, job: str = "nightly") -> dict:
    """A record of `job` whose run has an environment: torch `torch` (built for CUDA 12.6)
    on its GPU, Python 3.11."""
    arch = found["runners"][0]["type"]
    return {**found, "name": job,
            "runners": [{"name": "cuda", "type": arch, "gpu_info": arch,
                         "extra_info": {"python": "3.11.9"}}],
            "dependencies": {"torch": {"version": torch, "extra_info": {"cuda": "12.6"}}}}


def upload(night: int, records: list[dict], repo: str = "pytorch/ao",
           job: int = 0, branch: str = "main", head_sha: str | None = None) -> Stored:
    metadata = {"repo": repo, "head_branch": branch, "head_sha": head_sha or sha(night),
                "workflow_id": 1000 + night, "run_attempt": 1, "job_id": 100 * night + job,
                "name": "nightly", "timestamp": START + night * DAY + 60 * job}
    return store_upload(orjson.dumps(records), metadata=metadata, source=Upload.Source.DEMO)


def levels(nights: int, level: float = 2.0, step_at: int | None = None, step: float = 0.0,
           noise: float = 0.01, repetitions: int = 3, seed: int = 0) -> list[list[float]]:
    """Repetitions of each night: `level`, times 1 + `step` from night `step_at` on."""
    rng = np.random.default_rng(seed)
    values = []
    for night in range(nights):
        mean = level * (1 + step if step_at is not None and night >= step_at else 1)
        run = 1 + rng.normal(0, noise)
        values.append([round(mean * run * (1 + rng.normal(0, noise / 3)), 6)
                       for _ in range(repetitions)])
    return values


def store_history(histories: dict[str, list[list[float]]], metric=TIME, first_night: int = 0,
                  **record_options) -> dict[str, Series]:
    """One upload per night holding every model's repetitions; the series by model."""
    nights = len(next(iter(histories.values())))
    for offset in range(nights):
        upload(first_night + offset,
               [record(model, values[offset], metric, **record_options)
                for model, values in histories.items()])
    return {s.model: s for s in Series.objects.filter(model__in=list(histories),
                                                      metric=metric[0])}


def at(night: int, job: int = 0) -> datetime:
    """The time of a night's upload (its runs' timestamp)."""
    return datetime.fromtimestamp(START + night * DAY + 60 * job, UTC)


def make_regression(series: Series, night: int, *, kind: str = "regression",
                    magnitude: float = 0.2, detector: str = "changepoint",
                    state: str = "open", branch: str = "main", good_night: int | None = None,
                    **fields) -> Regression:
    """A record as detection makes it (with its first event), first bad at `night`, last
    good at `good_night` (default the night before), on the runs stored for those nights."""
    good_night = night - 1 if good_night is None else good_night
    # The runs of those commits, those with the series' results last: they win where
    # another job's run has the same commit.
    measured = set(Result.objects.filter(series=series).values_list("run_id", flat=True))
    runs = {run.head_sha: run for run in sorted(
        Run.objects.filter(repo=series.repo, head_sha__in=[sha(night), sha(good_night)]),
        key=lambda run: (run.pk in measured, run.pk))}
    accuracy = detector in ("accuracy", "missing")
    regression = Regression.objects.create(
        series=series, branch=branch, detector=detector, kind=kind,
        direction="" if kind == "change" else "higher" if accuracy else "lower",
        first_bad_run=runs.get(sha(night)), first_bad_sha=sha(night), first_bad_at=at(night),
        last_good_run=runs.get(sha(good_night)), last_good_sha=sha(good_night),
        last_good_at=at(good_night), baseline=1.0 if accuracy else 2.0,
        value=0.0 if accuracy else 2.0 * (1 + magnitude),
        magnitude=-1.0 if accuracy else magnitude, confidence=None if accuracy else 1e-6,
        points_after=3, detected_at=at(night + 3), state=state, **fields)
    RegressionEvent.objects.create(regression=regression, to_state=state,
                                   note=f"raised by the {regression.get_detector_display()}")
    return regression


def make_group(*members: Regression) -> AlertGroup:
    """The group of these records (one repo and branch): its range the intersection of
    theirs, as detection makes it."""
    first = members[0]
    group = AlertGroup(repo=first.series.repo, branch=first.branch,
                       first_bad_sha=first.first_bad_sha, first_bad_at=first.first_bad_at,
                       last_good_sha=first.last_good_sha, last_good_at=first.last_good_at)
    for member in members[1:]:
        group.narrow(member)
    group.save()
    Regression.objects.filter(pk__in=[m.pk for m in members]).update(group=group)
    for member in members:
        member.group = group
    return group
