"""A measurement as PyTorch OSS benchmark ("v3") records.

benchmark.extra_info holds the runtime mode, autograd mode and thread count, so every
expansion of a definition is its own time series; model.name is the definition (with its
variant). A counted benchmark has two metrics: instructions per call (one value per
repeat) and wall time per call. A skipped or failed one becomes one "status" record whose
string value sits in metric.extra_info.benchmark_values, as in the quantization family.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runner.instructions.callgrind import OK, Measurement

if TYPE_CHECKING:
    from runner.environment import RunContext

BENCHMARK_NAME = "instruction counts"
COUNT_METRIC = "instruction_count"
WALL_METRIC = "wall_time"
STATUS_METRIC = "status"
ORIGINS = ["pytorch"]
DEVICE = "cpu"


def measurement_records(result: Measurement, context: RunContext) -> list[dict[str, Any]]:
    if result.status != OK:
        key = "error" if result.status == "failed" else "reason"
        return [_record(result, context, {
            "name": STATUS_METRIC, "target_value": 0.0,
            "extra_info": {"benchmark_values": [result.status], key: result.error}})]
    return [
        _record(result, context, {
            "name": COUNT_METRIC, "benchmark_values": result.per_call, "target_value": 0.0,
            "extra_info": {"unit": "count", "per": "call", "number": result.number,
                           "totals": result.counts, "spread": result.spread, "denoised": True,
                           "attempts": result.attempts}}),
        _record(result, context, {
            "name": WALL_METRIC, "benchmark_values": result.wall_us, "target_value": 0.0,
            "extra_info": {"unit": "us", "per": "call"}}),
    ]


def _record(result: Measurement, context: RunContext, metric: dict[str, Any]) -> dict:
    benchmark = result.benchmark
    definition = benchmark.definition
    return {
        "benchmark": {
            "name": BENCHMARK_NAME,
            "mode": "training" if benchmark.autograd == "forward_backward" else "inference",
            "extra_info": {"runtime": benchmark.runtime, "autograd": benchmark.autograd,
                           "threads": benchmark.threads},
        },
        "model": {"name": definition.name, "type": definition.kind,
                  "backend": benchmark.runtime, "origins": list(ORIGINS)},
        "metric": metric,
        "runners": context.runners(DEVICE),
        "dependencies": context.dependencies(),
    }
