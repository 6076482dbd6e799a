"""Realistic benchmark histories: nightly torchao microbenchmarks, PyTorch HUD-style
compiler runs (speedup, accuracy, compile time, memory), LLM serving metrics and, for the
last two weeks, fused-kernel layers (GB/s per backend, as runner.kernels writes them).

Values follow simple models of each device with run-to-run noise, and a few changes are
injected so the dashboards and detectors have something to find:

- on night 30 the H100 machine gets a new torch nightly (ENVIRONMENT_NIGHT: its runs'
  `dependencies` say so) and float8wo on it gets 6% slower (every shape): not a commit's
  change but the environment's, which detection labels as such;
- int8dq on H100 gets 12% slower from night 60 on (every shape);
- float8dq-row on H100 gets 20% slower for M = 1024 only, from night 75 on;
- int4wo-128 on A100 gets 8% faster from night 40 on;
- the A100 runner does not report on nights 20-22 (an outage);
- the compilers benchmark (inductor backend, training) on huggingface models gets 8% less
  speedup from night 70 on, and one model starts failing accuracy from night 80 on;
- the instruction count of one benchmark (INSTRUCTIONS_STEP) grows 3% on the third-last
  night (counts are otherwise the same at each commit, but for a 0.1% wobble);
- on the second-last night the H100 quantization runner is unhealthy: its `baseline` recipe
  (bf16 timed against itself, the sanity check) reads 1.04x, with an interval that excludes
  1.00. On every other night, and device, that interval holds 1.00.

Quantization speedups are written as the runner's paired timing writes them: the ratio of
each interleaved pair as values (their median is the speedup: for the recipes, the bf16
time over the quantized one, as before), and in extra_info the sign-test 95% interval of
the median (`runner.engine.paired.median_interval`), the pairs and `unstable`. About one cell in
seventy has a noisy neighbour on its night: it runs to its budget and mostly stays unstable
(as do a few quiet A100 cells: 1% of H100 speedups are unstable, 3% of A100 ones).

Records are written as torchao's CI and PyTorch's inductor dashboards write them (with
`runners`/`dependencies`) and stored through `store_upload`, the API's own path. `DEMO` is
the newcomer's data set; `LARGE` is a year on more devices (about 10 million results).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import math
import random
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from runner.contract.metrics import string_metric
from runner.contract.names import (
    COMPILERS_BENCHMARK,
    INSTRUCTIONS_BENCHMARK,
    INSTRUCTIONS_ORIGINS,
    KERNELS_BENCHMARK,
    KERNELS_MODEL_TYPE,
    KERNELS_ORIGINS,
    QUANT_BASELINE_RECIPE,
    QUANT_BENCHMARK,
    QUANT_MODEL_TYPE,
    QUANT_ORIGINS,
    CompilerMetric,
    InstructionMetric,
    KernelMetric,
    QuantMetric,
    quant_model_name,
)
from runner.contract.status import SKIPPED, status_metric
from runner.engine.paired import STOPPED_BUDGET, PairedTiming, speedup_metric
from runner.engine.timing_data import TimingSettings
from runner.instructions.builtin import BUILTIN as INSTRUCTION_DEFINITIONS
from runner.instructions.definitions import expand as expand_instructions
from runner.kernels.definitions import bytes_moved


@dataclass(frozen=True)
class Device:
    arch: str
    short: str
    bf16_tflops: float
    bandwidth_gbs: float
    float8: bool
    noise: float


H100 = Device("NVIDIA H100 80GB HBM3", "h100", 700.0, 3000.0, True, 0.01)
A100 = Device("NVIDIA A100-SXM4-80GB", "a100", 280.0, 1800.0, False, 0.02)
MI300X = Device("AMD Instinct MI300X", "mi300x", 900.0, 4800.0, True, 0.015)
L4 = Device("NVIDIA L4", "l4", 120.0, 300.0, True, 0.02)
XEON = Device("Intel(R) Xeon(R) Platinum 8488C", "xeon", 0.0, 300.0, False, 0.02)


@dataclass(frozen=True)
class Scale:
    nights: int
    quant_devices: tuple[Device, ...]
    recipes: tuple[str, ...]
    powers: tuple[int, ...]  # small_sweep shapes over these powers of two
    compile_modes: tuple[str, ...]
    compiler_devices: tuple[Device, ...]
    models_per_suite: int
    llm_devices: tuple[Device, ...]
    kernel_devices: tuple[Device, ...] = (H100,)
    kernel_nights: int = 14  # the fused-kernel job runs on the latest nights only


DEMO = Scale(
    nights=90, quant_devices=(H100, A100),
    recipes=("int8wo", "int8dq", "float8dq-tensor", "float8dq-row", "float8wo", "int4wo-128"),
    powers=(10, 11, 12, 13), compile_modes=("max-autotune",), compiler_devices=(H100,),
    models_per_suite=8, llm_devices=(H100,),
)
LARGE = Scale(
    nights=365, quant_devices=(H100, A100, MI300X),
    recipes=("int8wo", "int8dq", "float8dq-tensor", "float8dq-row", "float8wo", "int4wo-64",
             "int4wo-128", "int4wo-128-hqq"),
    powers=(10, 11, 12, 13, 14, 15), compile_modes=("none", "max-autotune"),
    compiler_devices=(H100, A100, MI300X, L4), models_per_suite=96,
    llm_devices=(H100, A100, MI300X),
)

# Compute speed-up and weight-byte ratio of each recipe against bf16.
RECIPE_MODEL = {
    QUANT_BASELINE_RECIPE: (1.0, 1.0),
    "int8wo": (1.0, 0.5), "int8dq": (1.6, 0.5), "float8dq-tensor": (1.8, 0.5),
    "float8dq-row": (1.7, 0.5), "float8wo": (1.0, 0.5), "int4wo-64": (0.75, 0.28),
    "int4wo-128": (0.8, 0.27), "int4wo-128-hqq": (0.78, 0.27),
}
SUITES = ("torchbench", "huggingface", "timm_models")
BACKENDS = ("inductor", "aot_eager")
LLM_MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-32B", "google/gemma-3-27b-it")
KERNEL_SHAPES = ((32768, 1024), (32768, 4096), (32768, 16384))
# Share of the device's bandwidth a forward pass reaches on large rows (backward: x 0.85);
# eager runs several kernels for cross entropy and RMSNorm, so it moves more than it must.
KERNEL_EFFICIENCY = {
    "eager": {"cross_entropy": 0.42, "softmax": 0.74, "rms_norm": 0.38, "layer_norm": 0.7},
    "compiled": {"cross_entropy": 0.83, "softmax": 0.86, "rms_norm": 0.85, "layer_norm": 0.84},
    "liger": {"cross_entropy": 0.8, "softmax": 0.82, "rms_norm": 0.83, "layer_norm": 0.8},
}
KERNEL_COMPILE_MODE = "max-autotune-no-cudagraphs"
LLM_METRICS = (("median_ttft_ms", "ms", 45.0), ("median_itl_ms", "ms", 12.0),
               ("requests_per_second", "req/s", 9.0), ("tokens_per_second", "tok/s", 2400.0))


# The H100 machine's torch nightly before and from ENVIRONMENT_NIGHT on.
ENVIRONMENT_NIGHT = 30
TORCH_NIGHTLIES = ("2.13.0.dev20260928", "2.13.0.dev20260929")


@dataclass(frozen=True)
class Injected:
    """A change the demo injects (see the module's docstring): from which night, and the
    series fields (exact, or a prefix for `model`) of the series that show it; whether the
    runs' environment changed with it."""

    name: str
    night: int
    fields: tuple[tuple[str, str], ...]
    environment: bool = False

    def shows_in(self, series) -> bool:
        """Whether a series (anything with the Series fields) is one of those changed."""
        return all(getattr(series, name).startswith(value) if name in ("model", "arch")
                   else getattr(series, name) == value for name, value in self.fields)


def injected(nights: int = DEMO.nights) -> list[Injected]:
    """The step changes and failures a history of `nights` nights holds (the outage and the
    one unhealthy night are not changes of a series' level)."""
    changes = [
        Injected("torch nightly on H100: float8wo 6% slower", ENVIRONMENT_NIGHT,
                 (("benchmark", QUANT_BENCHMARK), ("dtype", "float8wo"), ("arch", H100.arch)),
                 environment=True),
        Injected("int8dq on H100 12% slower", 60,
                 (("benchmark", QUANT_BENCHMARK), ("dtype", "int8dq"), ("arch", H100.arch))),
        Injected("float8dq-row on H100 20% slower for M = 1024", 75,
                 (("benchmark", QUANT_BENCHMARK), ("arch", H100.arch),
                  ("model", quant_model_name("float8dq-row", "1024-")))),
        Injected("int4wo-128 on A100 8% faster", 40,
                 (("benchmark", QUANT_BENCHMARK), ("dtype", "int4wo-128"),
                  ("arch", A100.arch))),
        Injected("inductor training on huggingface 8% less speedup", 70,
                 (("benchmark", COMPILERS_BENCHMARK), ("backend", "inductor"),
                  ("mode", "training"), ("suite", "huggingface"))),
        Injected("timm_model_03 fails accuracy", 80,
                 (("benchmark", COMPILERS_BENCHMARK), ("model", "timm_model_03"))),
        Injected("instruction count of linear +3%", nights - 3,
                 (("benchmark", INSTRUCTIONS_BENCHMARK), ("model", "linear"),
                  ("backend", "eager"))),
    ]
    return [change for change in changes if change.night < nights]


def sha(night: int) -> str:
    return hashlib.sha1(f"demo-commit-{night}".encode()).hexdigest()


def _spread(name: str, buckets: int) -> float:
    """A stable number in [0, 1) per name (Python's hash() changes between processes)."""
    return int(hashlib.md5(name.encode()).hexdigest()[:8], 16) % buckets / buckets


def nightly_uploads(scale: Scale = DEMO, end: datetime | None = None,
                    nights: int | None = None,
                    only: set[int] | None = None) -> Iterator[tuple[dict, list]]:
    """(run metadata, records) of each job of each night (or of the nights in `only`),
    oldest night first. Each night has its own random stream, so nights can be made apart."""
    nights = nights or scale.nights
    latest = end or datetime.now(UTC)
    end = latest.replace(hour=3, minute=0, second=0, microsecond=0)
    if end > latest:  # before 03:00 the last night is yesterday's, not one in the future
        end -= timedelta(days=1)
    for night in range(nights):
        if only is not None and night not in only:
            continue
        rng = random.Random(20261121 + night)
        when = end - timedelta(days=nights - 1 - night)
        quant = functools.partial(_quant_records, bad_night=nights - 2)
        jobs = [("Torchao micro-benchmarks", "pytorch/ao", device, quant)
                for device in scale.quant_devices]
        jobs += [("inductor-A100-perf-nightly", "pytorch/pytorch", device, _compiler_records)
                 for device in scale.compiler_devices]
        jobs += [("vLLM benchmark", "vllm-project/vllm", device, _llm_records)
                 for device in scale.llm_devices]
        if night >= nights - scale.kernel_nights:
            jobs += [("Fused kernels nightly", "pytorch/pytorch", device, _kernel_records)
                     for device in scale.kernel_devices]
        jobs.append(("Instruction counts nightly", "pytorch/pytorch", XEON,
                     functools.partial(_instruction_records, step_night=nights - 3)))
        for number, (name, repo, device, make) in enumerate(jobs):
            if device is A100 and 20 <= night <= 22:
                continue
            metadata = {
                "repo": repo, "head_branch": "main", "head_sha": sha(night),
                "workflow_id": 17_000_000 + night, "run_attempt": 1,
                "job_id": 50_000_000 + 100 * night + number, "name": name,
                "timestamp": int(when.timestamp()) + 300 * number,
            }
            yield metadata, make(scale, device, night, rng)


def _quant_records(scale: Scale, device: Device, night: int, rng: random.Random,
                   bad_night: int) -> list:
    """The recipes' cells, then the baseline recipe's (from a random stream of their own, so
    the recipes' values, and every later job's of the night, stay as they were)."""
    sizes = [2**p for p in scale.powers]
    shapes = [(m, k, n) for m, k, n in itertools.product(sizes, repeat=3) if m <= k <= n]
    pairs_rng = random.Random(f"pairs {night} {device.short}")
    records = []
    for mode, recipe, (m, k, n) in itertools.product(scale.compile_modes, scale.recipes,
                                                     shapes):
        if recipe.startswith("float8") and not device.float8:
            continue
        compute, weight = RECIPE_MODEL[recipe]
        eager_penalty = 1.0 if mode == "max-autotune" else 1.15
        base = _latency_ms(device, m, k, n, 1.0, 1.0) * (1 + rng.gauss(0, device.noise))
        quant = (_latency_ms(device, m, k, n, compute, weight) * eager_penalty
                 * (1 + rng.gauss(0, device.noise)) * _quant_change(device, recipe, night, m))
        pairs = _pair_ratios(device, night, f"{mode} {recipe} {m}-{k}-{n}", pairs_rng)
        records += _quant_cell(device, night, mode, recipe, (m, k, n), base, quant,
                               _paired_speedup(base / quant, pairs))
    bad = device is scale.quant_devices[0] and night == bad_night
    for mode, (m, k, n) in itertools.product(scale.compile_modes, shapes):
        base, quant = (_latency_ms(device, m, k, n, 1.0, 1.0)
                       * (1 + pairs_rng.gauss(0, device.noise)) for _ in range(2))
        cell = f"{mode} {QUANT_BASELINE_RECIPE} {m}-{k}-{n}"
        speedup = (_paired_speedup(1.04, _pair_ratios(device, night, cell, pairs_rng)) if bad
                   else _baseline_speedup(device, night, cell, pairs_rng))
        records += _quant_cell(device, night, mode, QUANT_BASELINE_RECIPE, (m, k, n), base,
                               quant, speedup)
    return records


def _quant_cell(device: Device, night: int, mode: str, recipe: str,
                shape: tuple[int, int, int], base: float, quant: float, speedup: dict) -> list:
    m, k, n = shape
    memory = (2 * (m * k + m * n) + 2 * k * n * RECIPE_MODEL[recipe][1]) / 2**20
    common = {
        "benchmark": {"name": QUANT_BENCHMARK, "mode": "inference", "dtype": recipe,
                      "extra_info": {"device": "cuda", "arch": device.arch,
                                     "torch_compile_mode": mode}},
        "model": {"name": quant_model_name(recipe, f"{m}-{k}-{n}"), "type": QUANT_MODEL_TYPE,
                  "origins": list(QUANT_ORIGINS)},
        **_environment(device, night),
    }
    return [{**common, "metric": metric} for metric in (
        speedup, _metric(QuantMetric.BASELINE_TIME, base, "ms"),
        _metric(QuantMetric.QUANTIZED_TIME, quant, "ms"),
        _metric(QuantMetric.MEMORY, memory, "MB"),
    )]


PAIRS = TimingSettings()  # the runner's defaults: the interval's target, the least pairs
NOISY_PAIRS = 20  # a noisy cell runs to its time budget


def _pair_ratios(device: Device, night: int, cell: str, rng: random.Random) -> list[float]:
    """One cell's pair ratios, relative to its speedup. A pair's spread is half the device's
    run-to-run noise (pairs cancel drifts) and a quiet cell meets its target after a few
    pairs; a cell with a noisy neighbour that night (one in seventy) spreads eight times
    more and runs to its budget."""
    noisy = _spread(f"{night} {device.short} {cell}", 1000) < 0.015
    spread = device.noise * (4 if noisy else 0.5)
    count = NOISY_PAIRS if noisy else rng.randint(PAIRS.min_pairs, 12)
    return [1 + rng.gauss(0, spread) for _ in range(count)]


def _paired_speedup(speedup: float, draws: list[float],
                    name: str = QuantMetric.SPEEDUP) -> dict:
    """The speedup's record: the pair ratios scaled so that their median is `speedup`."""
    middle = statistics.median(draws)
    return _speedup_metric([speedup * draw / middle for draw in draws], name)


def _baseline_speedup(device: Device, night: int, cell: str, rng: random.Random) -> dict:
    """The baseline timed against itself: ratios around 1 whose interval holds 1.00 (drawn
    again when chance put it outside, as it would for one cell in twenty or so)."""
    while True:
        metric = _speedup_metric(_pair_ratios(device, night, cell, rng))
        if metric["extra_info"]["ci_low"] <= 1 <= metric["extra_info"]["ci_high"]:
            return metric


def _speedup_metric(ratios: list[float], name: str = QuantMetric.SPEEDUP) -> dict:
    """A paired speedup as the runner writes it; an unstable one ran to its budget."""
    paired = PairedTiming((), (), tuple(round(ratio, 6) for ratio in ratios),
                          target=PAIRS.ci_target)
    if paired.unstable:
        paired = dataclasses.replace(paired, stopped=STOPPED_BUDGET)
    return speedup_metric(name, paired)


def _quant_change(device: Device, recipe: str, night: int, m: int) -> float:
    """Multiplier on the quantized latency on this night."""
    if device is H100 and recipe == "float8wo" and night >= ENVIRONMENT_NIGHT:
        return 1.06
    if device is H100 and recipe == "int8dq" and night >= 60:
        return 1.12
    if device is H100 and recipe == "float8dq-row" and night >= 75 and m == 1024:
        return 1.20
    if device is A100 and recipe == "int4wo-128" and night >= 40:
        return 1 / 1.08
    return 1.0


def _latency_ms(device: Device, m: int, k: int, n: int, compute: float, weight: float):
    flops = 2 * m * k * n
    bytes_moved = 2 * (m * k + m * n) + 2 * k * n * weight
    compute_s = flops / (device.bf16_tflops * 1e12 * compute)
    memory_s = bytes_moved / (device.bandwidth_gbs * 1e9)
    return 1e3 * (max(compute_s, memory_s) + 8e-6)


def _compiler_records(scale: Scale, device: Device, night: int, rng: random.Random) -> list:
    records = []
    for suite, index, backend, mode in itertools.product(
            SUITES, range(scale.models_per_suite), BACKENDS, ("training", "inference")):
        model = f"{suite.split('_')[0]}_model_{index:02d}"
        # Each model has its own typical speedup; aot_eager does not fuse, so it is ~1x.
        typical = 1.0 + 1.5 * _spread(model, 97) if backend == "inductor" else 1.0
        if mode == "training":
            typical = 1 + (typical - 1) * 0.6
        if backend == "inductor" and mode == "training" and suite == "huggingface" \
                and night >= 70:
            typical *= 0.92
        failing = (backend == "inductor" and suite == "timm_models" and index == 3
                   and night >= 80)
        speedup = 0.0 if failing else typical * (1 + rng.gauss(0, device.noise))
        common = {
            "benchmark": {"name": COMPILERS_BENCHMARK, "mode": mode, "dtype": "amp",
                          "extra_info": {"device": "cuda", "arch": device.arch}},
            "model": {"name": model, "type": "model", "backend": backend, "origins": [suite]},
            **_environment(device, night),
        }
        accuracy = "fail_accuracy" if failing else "pass"
        compile_s = 20 + 40 * _spread(model, 13) * (1 + rng.gauss(0, 0.05))
        compression = 0.9 + 0.4 * _spread(model, 7)
        records += [
            {**common, "metric": _metric(CompilerMetric.SPEEDUP, speedup, "x")},
            {**common, "metric": string_metric(CompilerMetric.ACCURACY, accuracy)},
            {**common, "metric": _metric(CompilerMetric.COMPILE_TIME, compile_s, "s")},
            {**common, "metric": _metric(CompilerMetric.COMPRESSION, compression, "x")},
        ]
    return records


def _llm_records(scale: Scale, device: Device, night: int, rng: random.Random) -> list:
    speed = device.bandwidth_gbs / 3000.0
    records = []
    for model, tp in itertools.product(LLM_MODELS, (1, 2)):
        common = {
            "benchmark": {"name": "vLLM benchmark", "extra_info": {
                "args": {"model": model, "tensor_parallel_size": tp, "max_num_seqs": 256,
                         "enable_prefix_caching": True}}},
            "model": {"name": model, "extra_info": {"tensor_parallel_size": tp}},
            **_environment(device, night),
        }
        for metric, unit, typical in LLM_METRICS:
            factor = speed * tp ** 0.7
            value = typical / factor if unit == "ms" else typical * factor
            target = typical * (0.9 if unit == "ms" else 1.1)
            records.append({**common, "metric": {
                **_metric(metric, value * (1 + rng.gauss(0, device.noise)), unit),
                "target_value": round(target, 3)}})
    return records


def _kernel_records(scale: Scale, device: Device, night: int, rng: random.Random) -> list:
    """Each backend's speedup over eager is paired, with its interval, from a random stream
    of its own (so the latencies stay as they were)."""
    pairs_rng = random.Random(f"kernel pairs {night} {device.short}")
    records = []
    for kernel, direction, (m, n) in itertools.product(
            KERNEL_EFFICIENCY["eager"], ("forward", "backward"), KERNEL_SHAPES):
        moved = bytes_moved(kernel, direction, m, n, "bfloat16")
        latencies = {}
        for backend, shares in KERNEL_EFFICIENCY.items():
            share = shares[kernel] * (0.85 if direction == "backward" else 1.0)
            launch_s = 6e-6 if backend == "eager" else 4e-6
            latencies[backend] = 1e3 * (moved / (device.bandwidth_gbs * 1e9 * share) + launch_s) \
                * (1 + rng.gauss(0, device.noise / 2))
        for backend, latency in latencies.items():
            mode = KERNEL_COMPILE_MODE if backend == "compiled" else "none"
            common = {
                "benchmark": {"name": KERNELS_BENCHMARK, "mode": direction, "dtype": "bfloat16",
                              "extra_info": {"device": "cuda", "arch": device.arch,
                                             "torch_compile_mode": mode, "shape": [m, n],
                                             "shape_name": f"{m}x{n}", "l2_flush": True}},
                "model": {"name": kernel, "type": KERNELS_MODEL_TYPE, "backend": backend,
                          "origins": list(KERNELS_ORIGINS)},
                **_environment(device, night),
            }
            metrics = [_metric(KernelMetric.LATENCY, latency, "ms"),
                       _metric(KernelMetric.BANDWIDTH, moved / latency / 1e6, "GB/s")]
            if backend != "eager":
                cell = f"{kernel} {direction} {m}x{n} {backend}"
                pairs = _pair_ratios(device, night, cell, pairs_rng)
                metrics += [_paired_speedup(latencies["eager"] / latency, pairs,
                                            KernelMetric.SPEEDUP),
                            string_metric(KernelMetric.ACCURACY, "pass")]
            records += [{**common, "metric": metric} for metric in metrics]
    return records


INSTRUCTIONS_STEP = "linear [eager, forward, 1 thread]"


def _instruction_records(scale: Scale, device: Device, night: int, rng: random.Random,
                         step_night: int) -> list:
    """Counts per call of the built-in definitions (eager and TorchScript, forward and
    forward+backward, one thread), as runner.instructions writes them."""
    records = []
    for benchmark in expand_instructions(INSTRUCTION_DEFINITIONS, threads=(1,)):
        key, definition = benchmark.key, benchmark.definition
        common = {
            "benchmark": {"name": INSTRUCTIONS_BENCHMARK,
                          "mode": "training" if benchmark.autograd == "forward_backward"
                          else "inference",
                          "extra_info": {"runtime": benchmark.runtime,
                                         "autograd": benchmark.autograd, "threads": 1}},
            "model": {"name": definition.name, "type": definition.kind,
                      "backend": benchmark.runtime, "origins": list(INSTRUCTIONS_ORIGINS)},
            "runners": [{"name": "cpu", "type": device.arch, "cpu_info": device.arch,
                         "cpu_count": 16, "gpu_count": 0}],
            "dependencies": {"torch": {"version": "2.13.0"}},
        }
        reason = benchmark.cannot_run()
        if reason:
            records.append({**common, "metric": status_metric(SKIPPED, reason)})
            continue
        count = (6000 + 30000 * _spread(definition.name, 101)) * (
            (20 if definition.model else 1) * (1.6 if benchmark.runtime == "torchscript" else 1)
            * (3.5 if benchmark.autograd == "forward_backward" else 1))
        count *= 1 + 0.002 * (_spread(f"{key} {sha(night)}", 1000) - 0.5)
        if key == INSTRUCTIONS_STEP and night >= step_night:
            count *= 1.03
        counts = [round(count * (1 + 0.0002 * (_spread(f"{key} {night} {r}", 100) - 0.5)), 2)
                  for r in range(3)]
        wall_us = count / 3000 * (1 + rng.gauss(0, device.noise))
        records += [
            {**common, "metric": {"name": InstructionMetric.COUNT, "benchmark_values": counts,
                                  "target_value": 0.0,
                                  "extra_info": {"unit": "count", "per": "call", "number": 100}}},
            {**common, "metric": _metric(InstructionMetric.WALL_TIME, wall_us, "us")},
        ]
    return records


def _environment(device: Device, night: int) -> dict:
    """The runner and packages of a GPU job: the H100 machine runs torch nightlies (a new
    one from ENVIRONMENT_NIGHT on), the others a release."""
    torch = ("2.13.0" if device is not H100
             else TORCH_NIGHTLIES[night >= ENVIRONMENT_NIGHT])
    runtime = {"hip": "6.4"} if device is MI300X else {"cuda": "12.8"}
    return {
        "runners": [{"name": "cuda" if device is not MI300X else "rocm", "type": device.arch,
                     "gpu_count": 1, "gpu_info": device.arch}],
        "dependencies": {"torch": {"version": torch, "extra_info": runtime},
                         "torchao": {"version": "0.18.0"}},
    }


def _metric(name: str, value: float, unit: str) -> dict:
    return {"name": name, "benchmark_values": [round(value, 6) if math.isfinite(value)
                                               else value],
            "target_value": 0.0, "extra_info": {"unit": unit}}
