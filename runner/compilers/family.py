"""The compilers family (see runner.families), the model experiment matrix: one cell is one
configuration, run in its own subprocess with its timeout.

A backend's memory ratio compares with the eager configuration of the same model, test,
dtype and batch size; its speedup is timed paired with an eager copy in its own process.
Eager is planned first, and its line is kept in `state`; a cell whose baseline is not there
(it ran on another worker, or eager is not in the matrix) runs the eager configuration
itself first, as a baseline only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from runner.compilers import launch, records
from runner.compilers.matrix import BACKENDS, EAGER, Config
from runner.compilers.spec import parse
from runner.contract.directions import HIGHER, LOWER
from runner.contract.names import COMPILERS_BENCHMARK, CompilerMetric
from runner.contract.status import FAILED, OK
from runner.engine.cells import Outcome, Planned
from runner.engine.folders import inside
from runner.engine.paired import PairedTiming
from runner.engine.run_context import RunContext
from runner.engine.run_settings import at_least, validate

NAME = "compilers"
# Its records' benchmark.name (runner.contract.names), and which way is better for each of
# their metrics (runner.contract.directions; added by runner.families.register). Accuracy is
# the HUD's strings: it has no direction.
BENCHMARK = COMPILERS_BENCHMARK
DIRECTIONS = {
    CompilerMetric.SPEEDUP: HIGHER,
    CompilerMetric.LATENCY: LOWER,
    CompilerMetric.COMPILE_TIME: LOWER,
    CompilerMetric.COMPRESSION: HIGHER,
    CompilerMetric.MEMORY: LOWER,
    CompilerMetric.GRAPH_BREAKS: LOWER,
}


@dataclass(frozen=True)
class CompilerSettings:
    """A job's run settings; those it gives override the spec's."""

    # timed repetitions of each configuration (the spec's `repeat`)
    samples: int = field(default=10, metadata=at_least(1))


def plan(data: Mapping[str, Any], source: str) -> list[Planned]:
    return [Planned(config.key, config.to_dict()) for config in parse(data, source)]


def code_refs(cell: Mapping[str, Any]) -> list[str]:
    """The `module:function` references the cell imports and calls: its model's factory and
    a backend given as a function."""
    config = Config.from_dict(dict(cell))
    refs = [config.model.factory] if config.model.factory else []
    return refs + ([config.backend] if config.backend not in BACKENDS else [])


def check_settings(settings: Mapping[str, Any]) -> None:
    validate(settings, CompilerSettings)


def configuration(cell: Mapping[str, Any], settings: Mapping[str, Any]) -> Config:
    config = Config.from_dict(dict(cell))
    return replace(config, repeat=settings["samples"]) if "samples" in settings else config


def run(cell: dict[str, Any], settings: Mapping[str, Any], state: dict[str, Any],
        context: RunContext, files: Path) -> Outcome:
    config = configuration(cell, settings)
    config = replace(config, output_dir=str(inside(files, config.output_dir)))
    baselines: dict[str, dict[str, Any]] = state.setdefault("baselines", {})
    baseline = None
    if config.backend != EAGER:
        eager = config.baseline()
        if eager.key not in baselines:
            baselines[eager.key] = execute(eager, context)
        baseline = baselines[eager.key]
    result = execute(config, context)
    if config.backend == EAGER:
        baselines[config.key] = result
    error = result["metrics"].get("error", "")
    paired = result["metrics"].get("paired")
    return Outcome(FAILED if error else OK, records.build(config, result, baseline, context),
                   error=error, measured_s=sum(result["metrics"].get("total_time", [])) or None,
                   unstable=bool(paired) and PairedTiming.from_dict(paired).unstable,
                   detail=result)


def execute(config: Config, context: RunContext) -> dict[str, Any]:
    """The configuration's results line, from its subprocess."""
    return launch.run(config, context.arch(config.device), int(time.time()))
