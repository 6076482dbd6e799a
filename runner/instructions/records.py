"""A measurement as PyTorch OSS benchmark ("v3") records.

benchmark.extra_info holds the runtime mode, autograd mode and thread count, so every
expansion of a definition is its own time series; model.name is the definition (with its
variant). A counted benchmark has two metrics: instructions per call (one value per
repeat) and wall time per call. A skipped or failed one becomes one "status" record
(runner.contract.status), as in every family.
"""

from __future__ import annotations

from typing import Any

from runner.contract.names import INSTRUCTIONS_BENCHMARK, INSTRUCTIONS_ORIGINS, InstructionMetric
from runner.contract.status import OK, status_metric
from runner.engine.run_context import RunContext
from runner.instructions.callgrind import Measurement

DEVICE = "cpu"


def measurement_records(result: Measurement, context: RunContext) -> list[dict[str, Any]]:
    if result.status != OK:
        return [_record(result, context, status_metric(result.status, result.error))]
    return [
        _record(result, context, {
            "name": InstructionMetric.COUNT, "benchmark_values": result.per_call,
            "target_value": 0.0,
            "extra_info": {"unit": "count", "per": "call", "number": result.number,
                           "totals": result.counts, "spread": result.spread, "denoised": True,
                           "attempts": result.attempts}}),
        _record(result, context, {
            "name": InstructionMetric.WALL_TIME, "benchmark_values": result.wall_us,
            "target_value": 0.0,
            "extra_info": {"unit": "us", "per": "call"}}),
    ]


def _record(result: Measurement, context: RunContext, metric: dict[str, Any]) -> dict:
    benchmark = result.benchmark
    definition = benchmark.definition
    return {
        "benchmark": {
            "name": INSTRUCTIONS_BENCHMARK,
            "mode": "training" if benchmark.autograd == "forward_backward" else "inference",
            "extra_info": {"runtime": benchmark.runtime, "autograd": benchmark.autograd,
                           "threads": benchmark.threads},
        },
        "model": {"name": definition.name, "type": definition.kind,
                  "backend": benchmark.runtime, "origins": list(INSTRUCTIONS_ORIGINS)},
        "metric": metric,
        "runners": context.runners(DEVICE),
        "dependencies": context.dependencies(),
    }
