"""Benchmark families and the one interface through which the CLI and the workers run them.

A spec's `family:` key picks the family (runner.engine.specs.family_name); without it the spec is a
torchao quantization microbenchmark config, so torchao's files run unchanged. Each family is a
module with:

    NAME: str
    plan(data: Mapping, source: str) -> list[runner.engine.cells.Planned]
        validate a parsed spec (without its `family` key) and expand it into cells;
        raise runner.engine.specs.SpecError listing every problem. Needs no torch.
    check_settings(settings: Mapping) -> None
        raise ValueError unless `settings` (a job's run options, e.g. timing) are valid
        (runner.engine.run_settings.validate against the family's settings dataclass).
    run(cell: dict, settings: Mapping, state: dict, context: RunContext, files: Path)
            -> runner.engine.cells.Outcome
        run one planned cell. A cell that cannot run here is "skipped" with the reason, an
        error makes it "failed" with the traceback; neither raises. `state` lives as long as
        the worker runs cells of the same job (caches such as eager timings). The cell writes
        files (profiles, traces, snapshots) only under `files`, a folder its caller owns: a
        path the spec names is relative to it (runner.engine.folders).

A family whose specs may name code to import (`module:function`) also has

    code_refs(cell: dict) -> list[str]
        the references a planned cell would import and call, so the site can refuse
        modules its admins have not allowed before anything runs.

A family whose specs may carry Python source (run by the worker as written) also has

    inline_code(cell: dict) -> list[str]
        where a planned cell carries code other than the family's own (e.g. "definition
        'neg'"): empty when the cell runs only code shipped with the runner.

A family whose records the site judges also declares, beside NAME (the runner side of a
family is this one module and its package; names.py keeps the built-in families' names for
readers, which their modules re-export):

    BENCHMARK: str
        its records' benchmark.name (runner.contract.names)
    DIRECTIONS: Mapping[str, str]
        metric -> runner.contract.directions.HIGHER or LOWER, for BENCHMARK; `register`
        adds it to runner.contract.directions' table

Importing a family module imports no torch: `run` imports it when a cell runs.

A family is added with `register(module)` (the built-in ones below, one line each; a test
may register a toy family and `unregister` it). Importing `runner` registers the built-in
ones (runner/__init__.py), so the contract's directions know their metrics whichever runner
module a process imports first.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from runner.compilers import family as compilers
from runner.contract import directions
from runner.engine.cells import Planned
from runner.engine.specs import DEFAULT_FAMILY, SpecError, family_name
from runner.instructions import family as instructions
from runner.kernels import family as kernels
from runner.quant import family as quantization

# What every family module has (the interface above).
REQUIRED = ("NAME", "plan", "check_settings", "run")

FAMILIES: dict[str, ModuleType] = {}  # NAME -> module, in the order they were registered


def register(module: ModuleType) -> ModuleType:
    """Add a family module (returned, unchanged); its DIRECTIONS join the contract's table.
    Registering the same module again does nothing. TypeError when it lacks part of the
    interface; ValueError when another module has its NAME, or its directions contradict
    ones already declared."""
    missing = [name for name in REQUIRED if not hasattr(module, name)]
    if missing:
        raise TypeError(f"{module.__name__} is no family module: it lacks {', '.join(missing)}")
    known = FAMILIES.get(module.NAME)
    if known is module:
        return module
    if known is not None:
        raise ValueError(f"family {module.NAME!r} is already {known.__name__}")
    table = getattr(module, "DIRECTIONS", {})
    if table:
        directions.declare(getattr(module, "BENCHMARK", ""), table)
    FAMILIES[module.NAME] = module
    return module


def unregister(name: str) -> ModuleType:
    """Take a registered family away again (a test's toy family), with its directions."""
    module = FAMILIES.pop(name)
    table = getattr(module, "DIRECTIONS", {})
    if table:
        directions.withdraw(module.BENCHMARK, table)
        for other in FAMILIES.values():  # what they declare too stays declared
            if getattr(other, "DIRECTIONS", {}):
                directions.declare(other.BENCHMARK, other.DIRECTIONS)
    return module


register(quantization)
register(kernels)
register(compilers)
register(instructions)
assert DEFAULT_FAMILY in FAMILIES


def get(name: str) -> ModuleType:
    return FAMILIES[name]


def code_refs(family: ModuleType, cells: list[Planned]) -> list[str]:
    """Every `module:function` reference these cells of `family` name, once each."""
    if not hasattr(family, "code_refs"):
        return []
    return list(dict.fromkeys(ref for planned in cells for ref in family.code_refs(planned.cell)))


def inline_code(family: ModuleType, cells: list[Planned]) -> list[str]:
    """Where these cells of `family` carry Python source of their spec's own, once each."""
    if not hasattr(family, "inline_code"):
        return []
    return list(dict.fromkeys(place for planned in cells
                              for place in family.inline_code(planned.cell)))


def plan(data: Any, source: str) -> tuple[ModuleType, list[Planned]]:
    """The family of a parsed spec and its cells; SpecError when either is wrong."""
    name = family_name(data)
    if name not in FAMILIES:
        raise SpecError(source, [f"family: unknown family {name!r}; known: {', '.join(FAMILIES)}"])
    family = FAMILIES[name]
    body = {key: value for key, value in data.items() if key != "family"}
    return family, family.plan(body, source)
