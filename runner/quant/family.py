"""The quantization microbenchmarks as a family (see runner.families)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.families import Outcome, Planned
from runner.quant.cells import Cell, TimingSettings
from runner.quant.spec import parse_spec

if TYPE_CHECKING:
    from runner.environment import RunContext

NAME = "quantization"


def plan(data: Mapping[str, Any], source: str) -> list[Planned]:
    return [Planned(cell.key, cell.to_dict()) for cell in parse_spec(data, source).cells()]


def check_settings(settings: Mapping[str, Any]) -> None:
    known = {field.name for field in dataclasses.fields(TimingSettings)}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ValueError(f"unknown settings {unknown}; known: {sorted(known)}")
    try:
        TimingSettings(**settings)
    except TypeError as error:
        raise ValueError(str(error)) from None


def run(cell: dict[str, Any], settings: Mapping[str, Any], state: dict[str, Any],
        context: RunContext) -> Outcome:
    from runner.quant.execute import BaselineCache, run_cell

    baselines = state.setdefault("baselines", BaselineCache())
    spec_cell = Cell.from_dict(cell)
    Path(spec_cell.output_dir).mkdir(parents=True, exist_ok=True)
    result = run_cell(spec_cell, baselines, TimingSettings(**settings))
    return Outcome(result.status, result.records(context),
                   error=result.traceback or result.reason or "",
                   measured_s=result.measured_s, detail=result)
