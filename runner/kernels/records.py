"""A kernel cell's result as PyTorch OSS benchmark ("v3") records.

One series per (kernel, direction, shape, backend, compile mode, dtype, device): model.name
is the kernel, model.backend the backend, benchmark.mode the direction ("forward" or
"backward": the format's "inference"/"training" name passes of a whole model, and a
kernel's backward alone is neither), the shape in benchmark.extra_info.

Metrics: latency (ms, every sample; the median is the value), memory_bandwidth (GB/s, bytes
over the median latency), speedup (x: the ratio of every pair of blocks timed interleaved
with eager, their median the value, the 95% interval in extra_info; not for eager) and
accuracy ("pass"/"fail_accuracy" as strings, as TorchInductor's dashboards write them; not
for eager, the reference). A skipped or failed cell adds a "status" record with the reason
(runner.contract.status).
"""

from __future__ import annotations

from typing import Any

from runner.contract.metrics import number_metric, string_metric
from runner.contract.names import (
    KERNELS_BENCHMARK,
    KERNELS_MODEL_TYPE,
    KERNELS_ORIGINS,
    KernelMetric,
)
from runner.contract.status import OK, status_metric
from runner.engine.paired import speedup_metric
from runner.engine.run_context import RunContext
from runner.engine.timing_data import method_info
from runner.kernels.backends import optional_versions
from runner.kernels.results import FAIL_ACCURACY, KernelResult
from runner.kernels.spec import DEFAULT_RTOL


def cell_records(result: KernelResult, context: RunContext) -> list[dict[str, Any]]:
    metrics = []
    if result.accuracy is not None:
        metrics.append(string_metric(KernelMetric.ACCURACY, result.accuracy,
                                     **_tolerance(result)))
    if result.status == OK:
        metrics += _measurements(result)
    else:
        metrics.append(status_metric(result.status, result.reason))
    return [_record(result, context, metric) for metric in metrics]


def _measurements(result: KernelResult) -> list[dict[str, Any]]:
    timing = result.timing
    assert timing is not None and result.gbps is not None
    taken = result.paired or timing  # how the samples were timed
    metrics = [
        number_metric(KernelMetric.LATENCY, list(timing.samples_ms), "ms", median=timing.median_ms,
                calls_per_sample=timing.calls_per_sample,
                **method_info(taken.method, taken.l2, taken.method_note)),
        number_metric(KernelMetric.BANDWIDTH, [result.gbps], "GB/s", bytes=result.bytes),
    ]
    if result.paired is not None:
        metrics.append(speedup_metric(KernelMetric.SPEEDUP, result.paired,
                                      eager_median_ms=result.paired.baseline.median_ms))
    return metrics


def _record(result: KernelResult, context: RunContext, metric: dict[str, Any]) -> dict[str, Any]:
    cell = result.cell
    # benchmark.extra_info identifies the series; what varies by run goes with the value.
    extra: dict[str, Any] = {
        "device": cell.device,
        "arch": context.arch(cell.device),
        "torch_compile_mode": cell.compile_mode or "none",
        "shape": [cell.m, cell.n],
        "shape_name": cell.shape,
    }
    if cell.device == "cuda":
        extra["l2_flush"] = result.settings.flush_l2
    else:
        extra["cpu_threads"] = result.settings.threads
    per_run: dict[str, Any] = {"timing_samples": result.settings.samples}
    if result.notes:
        per_run["notes"] = "; ".join(result.notes)
    return {
        "benchmark": {"name": KERNELS_BENCHMARK, "mode": cell.direction, "dtype": cell.dtype,
                      "extra_info": extra},
        "model": {"name": cell.kernel, "type": KERNELS_MODEL_TYPE, "backend": cell.backend,
                  "origins": list(KERNELS_ORIGINS)},
        "metric": {**metric, "extra_info": {**metric["extra_info"], **per_run}},
        "runners": context.runners(cell.device),
        "dependencies": {**context.dependencies(), **optional_versions()},
    }




def _tolerance(result: KernelResult) -> dict[str, Any]:
    cell = result.cell
    found: dict[str, Any] = {"atol": cell.atol, "rtol": cell.rtol} if cell.atol is not None \
        else {"rtol": DEFAULT_RTOL[cell.dtype], "atol": "rtol x largest magnitude"}
    if result.accuracy == FAIL_ACCURACY:
        found["mismatch"] = result.reason
    return found
