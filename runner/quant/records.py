"""A cell result as PyTorch OSS benchmark ("v3") records, in torchao's CI format.

torchao's four metrics come first ("Fwd Speedup (x)" is compiled-over-compiled when the cell
compiles, else eager), then ours. A skipped or failed cell becomes one "status" record whose
string value sits in metric.extra_info.benchmark_values, so it stays visible on dashboards.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from runner.quant.results import OK, CellResult, Timing

if TYPE_CHECKING:
    from runner.environment import RunContext

BENCHMARK_NAME = "micro-benchmark api"
MODEL_TYPE = "micro-benchmark custom layer"
ORIGINS = ["torchao"]
STATUS_METRIC = "status"


def cell_records(result: CellResult, context: RunContext) -> list[dict[str, Any]]:
    if result.status != OK:
        detail_key = "error" if result.status == "failed" else "reason"
        status = {
            "name": STATUS_METRIC,
            "target_value": 0.0,
            "extra_info": {"benchmark_values": [result.status], detail_key: result.reason or ""},
        }
        return [_record(result, context, status)]
    return [_record(result, context, metric) for metric in _metrics(result)]


def _record(result: CellResult, context: RunContext, metric: dict[str, Any]) -> dict[str, Any]:
    cell = result.cell
    extra: dict[str, Any] = {
        "device": cell.device,
        "arch": context.arch(cell.device),
        "torch_compile_mode": cell.compile_mode or "none",
        "model_type": cell.model_type,
        "shape": [cell.shape.m, cell.shape.k, cell.shape.n],
        "shape_name": cell.shape.name,
        "quantization": cell.quantization,
        "sparsity": cell.sparsity or "none",
        "high_precision_dtype": f"torch.{cell.dtype}",
        "param_set": cell.name,
    }
    if result.settings is not None:
        if cell.device == "cuda":
            extra["l2_flush"] = result.settings.flush_l2
        else:
            extra["cpu_threads"] = result.settings.threads
    # benchmark.extra_info identifies the time series; what varies from run to run (artifact
    # paths, warnings, sample counts) goes with the value, in metric.extra_info.
    per_run: dict[str, Any] = {f"{kind}_path": path for kind, path in result.artifacts.items()}
    if result.settings is not None:
        per_run["timing_samples"] = result.settings.samples
    if result.notes:
        per_run["notes"] = "; ".join(result.notes)
    metric = {**metric, "extra_info": {**metric.get("extra_info", {}), **per_run}}
    return {
        "benchmark": {
            "name": BENCHMARK_NAME,
            "mode": cell.benchmark_mode,
            "dtype": cell.label,
            "extra_info": extra,
        },
        "model": {"name": cell.model_name, "type": MODEL_TYPE, "origins": list(ORIGINS)},
        "metric": metric,
        "runners": context.runners(cell.device),
        "dependencies": context.dependencies(),
    }


def _metric(name: str, values: list[float], unit: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "benchmark_values": [float(v) for v in values],
        "target_value": 0.0,
        "extra_info": {"unit": unit, **extra},
    }


def _time(name: str, timing: Timing) -> dict[str, Any]:
    """All samples as values; the median, which speedups use, in extra_info."""
    return _metric(
        name,
        list(timing.samples_ms),
        "ms",
        median=timing.median_ms,
        calls_per_sample=timing.calls_per_sample,
    )


def _metrics(result: CellResult) -> list[dict[str, Any]]:
    assert result.baseline and result.quantized and result.speedup is not None
    compiled = result.cell.compile_mode is not None
    metrics = [
        _metric("Fwd Speedup (x)", [result.speedup], "x", compiled=compiled),
        _time("Bfloat16 Fwd Time (ms)", result.baseline),
        _time("Quantized Fwd Time (ms)", result.quantized),
    ]
    if result.peak_memory_mb is not None:
        metrics.append(_metric("Allocated Memory (MB)", [result.peak_memory_mb], "MB"))
    if result.eager_speedup is not None:
        metrics.append(_metric("Eager Speedup (x)", [result.eager_speedup], "x"))
    if compiled and result.baseline_eager and result.quantized_eager:
        metrics += [
            _metric("Compiled Speedup (x)", [result.speedup], "x"),
            _time("Bfloat16 Eager Fwd Time (ms)", result.baseline_eager),
            _time("Quantized Eager Fwd Time (ms)", result.quantized_eager),
        ]
    if result.tflops is not None:
        metrics.append(_metric("Quantized TFLOP/s", [result.tflops], "TFLOP/s"))
    if result.gbps is not None:
        metrics.append(
            _metric("Quantized GB/s", [result.gbps], "GB/s", bytes=result.quantized_bytes)
        )
    if result.sqnr_db is not None and math.isfinite(result.sqnr_db):
        metrics.append(_metric("SQNR (dB)", [result.sqnr_db], "dB"))
    return metrics
