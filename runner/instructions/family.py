"""Instruction counts as a family (see runner.families): one cell is one expanded benchmark,
counted in a worker process of its own."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.contract.directions import LOWER
from runner.contract.names import INSTRUCTIONS_BENCHMARK, InstructionMetric
from runner.contract.status import OK
from runner.engine.cells import Outcome, Planned
from runner.engine.run_context import RunContext
from runner.engine.run_settings import validate
from runner.instructions.builtin import BUILTIN
from runner.instructions.callgrind import MeasureSettings, Pool
from runner.instructions.definitions import Benchmark, Definition
from runner.instructions.records import measurement_records
from runner.instructions.spec import parse_spec

NAME = "instructions"
# Its records' benchmark.name (runner.contract.names), and which way is better for each of
# their metrics (runner.contract.directions; added by runner.families.register).
BENCHMARK = INSTRUCTIONS_BENCHMARK
DIRECTIONS = {
    InstructionMetric.COUNT: LOWER,
    InstructionMetric.WALL_TIME: LOWER,
}


def plan(data: Mapping[str, Any], source: str) -> list[Planned]:
    spec = parse_spec(data, source)
    settings = dataclasses.asdict(spec.settings)
    return [Planned(b.key, {"benchmark": b.to_dict(), "settings": settings})
            for b in spec.benchmarks]


def inline_code(cell: Mapping[str, Any]) -> list[str]:
    """A definition of the spec's own (not one of BUILTIN, or one changed from it) is code
    that the worker executes as written."""
    definition = Definition.from_dict(cell["benchmark"]["definition"])
    return [] if definition in BUILTIN else [f"definition {definition.name!r}"]


def check_settings(settings: Mapping[str, Any]) -> None:
    validate(settings, MeasureSettings)


def run(cell: dict[str, Any], settings: Mapping[str, Any], state: dict[str, Any],
        context: RunContext, files: Path) -> Outcome:
    """Writes no files: `files` goes unused."""
    benchmark = Benchmark.from_dict(cell["benchmark"])
    # Pinned as the CLI's workers are; several cells may run at once, so spread by process.
    cores = sorted(os.sched_getaffinity(0))
    [result] = Pool(cores=[cores[os.getpid() % len(cores)]]).run(
        [benchmark], MeasureSettings(**{**cell["settings"], **settings}))
    return Outcome(result.status, measurement_records(result, context), error=result.error,
                   measured_s=result.seconds if result.status == OK else None, detail=result)
