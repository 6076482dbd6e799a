"""Nightly histories stored through the upload path, for the regression tests."""

from __future__ import annotations

import hashlib

import numpy as np
import orjson

from benchsite.results.ingest import Stored, store_upload
from benchsite.results.models import Series, Upload

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
