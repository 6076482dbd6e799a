"""The fused-kernel layers as a family (see runner.families): cross entropy, softmax, RMSNorm
and LayerNorm, forward and backward, on eager, torch.compile, Liger and Quack."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.contract.directions import HIGHER, LOWER
from runner.contract.names import KERNELS_BENCHMARK, KernelMetric
from runner.engine.cells import Outcome, Planned
from runner.engine.run_context import RunContext
from runner.engine.run_settings import validate
from runner.engine.timing_data import TimingSettings
from runner.kernels.records import cell_records
from runner.kernels.spec import KernelCell, parse

NAME = "kernels"
# Its records' benchmark.name (runner.contract.names), and which way is better for each of
# their metrics (runner.contract.directions; added by runner.families.register). Accuracy is
# a string ("pass" / "fail_accuracy"): it has no direction.
BENCHMARK = KERNELS_BENCHMARK
DIRECTIONS = {
    KernelMetric.LATENCY: LOWER,
    KernelMetric.BANDWIDTH: HIGHER,
    KernelMetric.SPEEDUP: HIGHER,
}


def plan(data: Mapping[str, Any], source: str) -> list[Planned]:
    return [Planned(cell.key, cell.to_dict()) for cell in parse(data, source)]


def check_settings(settings: Mapping[str, Any]) -> None:
    """A job's timing settings, which override the spec's `timing`."""
    validate(settings, TimingSettings)


def run(cell: dict[str, Any], settings: Mapping[str, Any], state: dict[str, Any],
        context: RunContext, files: Path) -> Outcome:
    """Writes no files: `files` goes unused."""
    from runner.kernels.execute import run_cell  # torch: only when a cell runs

    spec_cell = KernelCell.from_dict(cell)
    result = run_cell(spec_cell, spec_cell.timing_settings(settings))
    return Outcome(result.status, cell_records(result, context),
                   error=result.traceback or result.reason, measured_s=result.measured_s,
                   detail=result)
