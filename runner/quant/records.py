"""A cell result as PyTorch OSS benchmark ("v3") records, in torchao's CI format.

torchao's four metrics come first ("Fwd Speedup (x)" is compiled-over-compiled when the cell
compiles, else eager), then ours. A speedup's values are the ratios of its interleaved pairs
(their median is the speedup) and its extra_info carries the 95% interval and `unstable`
when the interval stayed wider than its target; a compiled speedup measured in several builds
carries each build (`builds`) and their combined interval (runner.engine.build_spread). The
headline speedup of a suspect cell carries `suspect` (why) and `top_kernels`; every record of a
CUDA cell carries the GPU's clocks at its start and end (`gpu_state`) and `clocks_moved`. A
skipped or failed cell becomes one "status" record (runner.contract.status), so it stays
visible on dashboards.
"""

from __future__ import annotations

import math
from typing import Any

from runner.contract.metrics import number_metric
from runner.contract.names import QUANT_BENCHMARK, QUANT_MODEL_TYPE, QUANT_ORIGINS, QuantMetric
from runner.contract.status import OK, status_metric
from runner.engine.build_spread import BuildSpread, spread_metric
from runner.engine.paired import PairedTiming, speedup_metric
from runner.engine.run_context import RunContext
from runner.engine.timing_data import Timing
from runner.quant.results import CellResult


def cell_records(result: CellResult, context: RunContext) -> list[dict[str, Any]]:
    """PyTorch OSS benchmark ("v3") records of one cell."""
    if result.status != OK:
        return [_record(result, context, status_metric(result.status, result.reason))]
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
    if result.paired is not None:  # where the cell's time went, and what else ran
        per_run.update(cell_wall_s=round(result.wall_s, 2),
                       compile_s=round(result.compile_s, 2),
                       autotune_s=round(result.autotune_s, 2),
                       measured_s=round(result.measured_s, 2))
        per_run.update({f"load_avg_{when}": load for when, load in result.load_avg.items()
                        if load is not None})
    if result.gpu_state:
        per_run["gpu_state"] = result.gpu_state
        per_run["clocks_moved"] = result.clocks_moved is not None
    metric = {**metric, "extra_info": {**metric.get("extra_info", {}), **per_run}}
    return {
        "benchmark": {
            "name": QUANT_BENCHMARK,
            "mode": cell.benchmark_mode,
            "dtype": cell.label,
            "extra_info": extra,
        },
        "model": {"name": cell.model_name, "type": QUANT_MODEL_TYPE,
                  "origins": list(QUANT_ORIGINS)},
        "metric": metric,
        "runners": context.runners(cell.device),
        "dependencies": context.dependencies(),
    }


def _speedup(name: str, measured: PairedTiming | BuildSpread, **extra: Any) -> dict[str, Any]:
    if isinstance(measured, BuildSpread):
        return spread_metric(name, measured, **extra)
    return speedup_metric(name, measured, **extra)


def _suspect(result: CellResult) -> dict[str, Any]:
    """What the headline speedup carries of a suspect cell."""
    if result.suspect is None:
        return {}
    return {"suspect": result.suspect, "top_kernels": result.top_kernels}


def _time(name: str, timing: Timing) -> dict[str, Any]:
    """All samples as values; the median, which speedups use, in extra_info."""
    return number_metric(
        name,
        list(timing.samples_ms),
        "ms",
        median=timing.median_ms,
        calls_per_sample=timing.calls_per_sample,
    )


def _metrics(result: CellResult) -> list[dict[str, Any]]:
    assert result.headline and result.eager and result.baseline and result.quantized
    compiled = result.cell.compile_mode is not None
    metrics = [
        _speedup(QuantMetric.SPEEDUP, result.headline, compiled=compiled, **_suspect(result)),
        _time(QuantMetric.BASELINE_TIME, result.baseline),
        _time(QuantMetric.QUANTIZED_TIME, result.quantized),
    ]
    if result.peak_memory_mb is not None:
        metrics.append(number_metric(QuantMetric.MEMORY, [result.peak_memory_mb], "MB"))
    metrics.append(_speedup(QuantMetric.EAGER_SPEEDUP, result.eager_combined))
    if result.compiled_combined is not None:
        metrics += [
            _speedup(QuantMetric.COMPILED_SPEEDUP, result.compiled_combined),
            _time(QuantMetric.BASELINE_EAGER_TIME, result.eager.baseline),
            _time(QuantMetric.QUANTIZED_EAGER_TIME, result.eager.candidate),
        ]
    if result.tflops is not None:
        metrics.append(number_metric(QuantMetric.TFLOPS, [result.tflops], "TFLOP/s"))
    if result.gbps is not None:
        metrics.append(
            number_metric(QuantMetric.GBPS, [result.gbps], "GB/s", bytes=result.quantized_bytes)
        )
    if result.sqnr_db is not None and math.isfinite(result.sqnr_db):
        metrics.append(number_metric(QuantMetric.SQNR, [result.sqnr_db], "dB"))
    return metrics
