"""The fused-kernel layers as a family (see runner.families): cross entropy, softmax, RMSNorm
and LayerNorm, forward and backward, on eager, torch.compile, Liger and Quack."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.cells import Outcome, Planned
from runner.environment import RunContext
from runner.kernels.records import cell_records
from runner.kernels.spec import KernelCell, parse
from runner.settings import validate
from runner.timing import TimingSettings

NAME = "kernels"


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
    timing = TimingSettings(**{**spec_cell.timing, **settings})
    result = run_cell(spec_cell, timing)
    return Outcome(result.status, cell_records(result, context),
                   error=result.traceback or result.reason, measured_s=result.measured_s,
                   detail=result)
