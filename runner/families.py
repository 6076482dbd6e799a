"""Benchmark families and the one interface through which the CLI and the workers run them.

A spec's `family:` key picks the family; without it the spec is a torchao quantization
microbenchmark config, so torchao's files run unchanged. Each family is a module with:

    NAME: str
    plan(data: Mapping, source: str) -> list[Planned]
        validate a parsed spec (without its `family` key) and expand it into cells;
        raise runner.specs.SpecError listing every problem. Needs no torch.
    check_settings(settings: Mapping) -> None
        raise ValueError unless `settings` (a job's run options, e.g. timing) are valid.
    run(cell: dict, settings: Mapping, state: dict, context: RunContext) -> Outcome
        run one planned cell. A cell that cannot run here is "skipped" with the reason, an
        error makes it "failed" with the traceback; neither raises. `state` lives as long as
        the worker runs cells of the same job (caches such as baseline timings).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from runner.specs import SpecError

DEFAULT = "quantization"
MODULES = {
    "quantization": "runner.quant.family",
    "kernels": "runner.kernels.family",
    "experiments": "runner.experiments.family",
    "instructions": "runner.instructions.family",
}
OK, SKIPPED, FAILED = "ok", "skipped", "failed"


@dataclass(frozen=True)
class Planned:
    key: str  # unique within the spec, readable: shown in job pages and progress bars
    cell: dict[str, Any]  # JSON-serialisable; what `run` receives, possibly in another process


@dataclass
class Outcome:
    status: str  # OK, SKIPPED or FAILED
    records: list[dict[str, Any]] = field(default_factory=list)  # OSS v3 records
    error: str = ""  # why it was skipped, or the traceback that failed it
    measured_s: float | None = None  # time inside timed calls
    detail: Any = None  # the family's own result object, for its reports


def family_name(data: Any) -> str:
    if isinstance(data, Mapping):
        return data.get("family", DEFAULT)
    return DEFAULT


def get(name: str) -> ModuleType:
    return importlib.import_module(MODULES[name])


def plan(data: Any, source: str) -> tuple[ModuleType, list[Planned]]:
    """The family of a parsed spec and its cells; SpecError when either is wrong."""
    name = family_name(data)
    if name not in MODULES:
        raise SpecError(source, [f"family: unknown family {name!r}; known: {', '.join(MODULES)}"])
    family = get(name)
    body = {key: value for key, value in data.items() if key != "family"}
    return family, family.plan(body, source)
