"""The quantization microbenchmarks as a family (see runner.families)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from runner.contract.directions import HIGHER, LOWER
from runner.contract.names import QUANT_BENCHMARK, QuantMetric
from runner.engine.cells import Outcome, Planned
from runner.engine.folders import inside
from runner.engine.run_context import RunContext
from runner.engine.run_settings import validate
from runner.engine.timing_data import TimingSettings
from runner.quant.cells import QuantCell
from runner.quant.records import cell_records
from runner.quant.spec import parse_spec

NAME = "quantization"
# Its records' benchmark.name (runner.contract.names), and which way is better for each of
# their metrics (runner.contract.directions; added by runner.families.register).
BENCHMARK = QUANT_BENCHMARK
DIRECTIONS = {
    **dict.fromkeys((QuantMetric.SPEEDUP, QuantMetric.EAGER_SPEEDUP, QuantMetric.COMPILED_SPEEDUP,
                     QuantMetric.TFLOPS, QuantMetric.GBPS, QuantMetric.SQNR), HIGHER),
    **dict.fromkeys((QuantMetric.BASELINE_TIME, QuantMetric.QUANTIZED_TIME, QuantMetric.MEMORY,
                     QuantMetric.BASELINE_EAGER_TIME, QuantMetric.QUANTIZED_EAGER_TIME), LOWER),
}


def plan(data: Mapping[str, Any], source: str) -> list[Planned]:
    return [Planned(cell.key, cell.to_dict()) for cell in parse_spec(data, source).cells()]


def check_settings(settings: Mapping[str, Any]) -> None:
    validate(settings, TimingSettings)


def run(cell: dict[str, Any], settings: Mapping[str, Any], state: dict[str, Any],
        context: RunContext, files: Path) -> Outcome:
    from runner.quant.execute import run_cell  # torch: only when a cell runs

    spec_cell = QuantCell.from_dict(cell)
    spec_cell = replace(spec_cell, output_dir=str(inside(files, spec_cell.output_dir)))
    result = run_cell(spec_cell, TimingSettings(**{**spec_cell.timing, **settings}))
    return Outcome(result.status, cell_records(result, context),
                   error=result.traceback or result.reason or "",
                   measured_s=result.measured_s, unstable=result.unstable, detail=result)
