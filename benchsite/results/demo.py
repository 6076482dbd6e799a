"""A realistic demo history: nightly torchao microbenchmark runs on two GPUs.

Latencies follow a roofline-like model per device and recipe with 1-2% run-to-run noise,
and a few changes are injected so the dashboards and detectors have something to find:

- int8dq on H100 gets 12% slower from night 60 on (every shape);
- float8dq-row on H100 gets 20% slower from night 75 on, for M = 1024 only;
- int4wo-128 on A100 gets 8% faster from night 40 on;
- the A100 runner does not report on nights 20-22 (an outage).

Records are written exactly as torchao's CI writes them (plus `runners`/`dependencies`) and
stored through `store_upload`, the API's own path.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

REPO = "pytorch/ao"
RECIPES = ("int8wo", "int8dq", "float8dq-tensor", "float8dq-row", "float8wo", "int4wo-128")
POWERS = (10, 11, 12, 13)


@dataclass(frozen=True)
class Device:
    arch: str
    short: str
    bf16_tflops: float
    bandwidth_gbs: float
    float8: bool
    noise: float


DEVICES = (
    Device("NVIDIA H100 80GB HBM3", "h100", 700.0, 3000.0, True, 0.01),
    Device("NVIDIA A100-SXM4-80GB", "a100", 280.0, 1800.0, False, 0.02),
)
# Compute speed-up and weight-byte ratio of each recipe against bf16 (eager-free, compiled).
RECIPE_MODEL = {
    "int8wo": (1.0, 0.5),
    "int8dq": (1.6, 0.5),
    "float8dq-tensor": (1.8, 0.5),
    "float8dq-row": (1.7, 0.5),
    "float8wo": (1.0, 0.5),
    "int4wo-128": (0.8, 0.27),
}


def small_sweep() -> list[tuple[int, int, int]]:
    sizes = [2**p for p in POWERS]
    return [(m, k, n) for m, k, n in itertools.product(sizes, repeat=3) if m <= k <= n]


def injected_change(device: Device, recipe: str, night: int, m: int) -> float:
    """Multiplier on the quantized latency on this night."""
    if device.short == "h100" and recipe == "int8dq" and night >= 60:
        return 1.12
    if device.short == "h100" and recipe == "float8dq-row" and night >= 75 and m == 1024:
        return 1.20
    if device.short == "a100" and recipe == "int4wo-128" and night >= 40:
        return 1 / 1.08
    return 1.0


def latency_ms(device: Device, m: int, k: int, n: int, compute: float, weight: float) -> float:
    flops = 2 * m * k * n
    bytes_moved = 2 * (m * k + m * n) + 2 * k * n * weight
    compute_s = flops / (device.bf16_tflops * 1e12 * compute)
    memory_s = bytes_moved / (device.bandwidth_gbs * 1e9)
    return 1e3 * (max(compute_s, memory_s) + 8e-6)


def sha(night: int) -> str:
    return hashlib.sha1(f"demo-commit-{night}".encode()).hexdigest()


def nightly_uploads(nights: int = 90, end: datetime | None = None) -> Iterator[tuple[dict, list]]:
    """(metadata, records) for each device and night, oldest first."""
    end = (end or datetime.now(UTC)).replace(hour=3, minute=0, second=0, microsecond=0)
    rng = random.Random(20261121)
    shapes = small_sweep()
    for night in range(nights):
        when = end - timedelta(days=nights - 1 - night)
        for number, device in enumerate(DEVICES):
            if device.short == "a100" and 20 <= night <= 22:
                continue
            metadata = {
                "repo": REPO, "head_branch": "main", "head_sha": sha(night),
                "workflow_id": 17_000_000 + night, "run_attempt": 1,
                "job_id": 50_000_000 + 2 * night + number, "name": "Torchao micro-benchmarks",
                "timestamp": int(when.timestamp()) + 600 * number,
            }
            records = []
            for recipe, (m, k, n) in itertools.product(RECIPES, shapes):
                if recipe.startswith("float8") and not device.float8:
                    continue
                compute, weight = RECIPE_MODEL[recipe]
                noise = 1 + rng.gauss(0, device.noise)
                base = latency_ms(device, m, k, n, 1.0, 1.0) * (1 + rng.gauss(0, device.noise))
                quant = (latency_ms(device, m, k, n, compute, weight) * noise
                         * injected_change(device, recipe, night, m))
                memory = (2 * (m * k + m * n) + 2 * k * n * weight) / 2**20
                records += _records(device, recipe, (m, k, n), base, quant, memory)
            yield metadata, records


def _records(device: Device, recipe: str, shape, base: float, quant: float, memory: float):
    m, k, n = shape
    common = {
        "benchmark": {"name": "micro-benchmark api", "mode": "inference", "dtype": recipe,
                      "extra_info": {"device": "cuda", "arch": device.arch,
                                     "torch_compile_mode": "max-autotune"}},
        "model": {"name": f"{recipe}-{m}-{k}-{n}", "type": "micro-benchmark custom layer",
                  "origins": ["torchao"]},
        "runners": [{"name": "cuda", "type": device.arch, "gpu_count": 1,
                     "gpu_info": device.arch}],
        "dependencies": {"torch": {"version": "2.13.0"}, "torchao": {"version": "0.18.0"}},
    }
    metrics = (("Fwd Speedup (x)", base / quant, "x"), ("Bfloat16 Fwd Time (ms)", base, "ms"),
               ("Quantized Fwd Time (ms)", quant, "ms"), ("Allocated Memory (MB)", memory, "MB"))
    return [
        {**common, "metric": {"name": name, "benchmark_values": [round(value, 6)],
                              "target_value": 0.0, "extra_info": {"unit": unit}}}
        for name, value, unit in metrics
    ]
