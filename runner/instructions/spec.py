"""A `family: instructions` spec: which built-in definitions, new ones, modes and settings.

    family: instructions
    builtin: ["add", "index/*"]     # globs over built-in names; true: all; false: none
                                    # (default: all, unless the spec has `definitions`)
    definitions:                    # new ones: stmt, model or variants, each with setup
      - {name: neg, setup: "x = torch.ones(4)", stmt: "y = -x", signature: "f(x) -> y"}
    filter: "add|linear"            # regex searched in each benchmark's key
    runtime: [eager, torchscript]   # default: both
    autograd: [forward, forward_backward]  # default: both
    threads: [1, 4]                 # default: each definition's own
    number: 1000                    # calls per count (a definition may set its own);
                                    # and repeats, timeout_s, retries, wall_time_s

Every problem is reported at once, by key path, through runner.engine.specs.SpecError.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.engine.run_settings import settings_problems
from runner.engine.specs import SpecError, check_cell_count
from runner.instructions.builtin import BUILTIN
from runner.instructions.callgrind import MeasureSettings
from runner.instructions.definitions import (
    AUTOGRAD_MODES,
    RUNTIMES,
    Benchmark,
    Definition,
    Signature,
    expand,
)

KEYS = {"builtin", "definitions", "filter", "runtime", "autograd", "threads",
        *MeasureSettings.names()}
DEFINITION_KEYS = {"name", "setup", "stmt", "model", "variants", "signature", "threads",
                   "number", "timeout_s"}
BODIES = ("stmt", "model", "variants")


@dataclass(frozen=True)
class InstructionSpec:
    benchmarks: list[Benchmark]
    settings: MeasureSettings


def parse_spec(data: Any, source: str, extra_filter: str | None = None) -> InstructionSpec:
    """The benchmarks a spec selects (and `extra_filter`, a regex, keeps); SpecError lists
    every problem."""
    problems: list[str] = []
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise SpecError(source, [f"expected a mapping of keys, not {type(data).__name__}"])
    problems += [f"{key}: unknown key; known: {', '.join(sorted(KEYS))}"
                 for key in data if key not in KEYS]
    own = [d for d in (_definition(item, f"definitions[{i}]", problems)
                       for i, item in enumerate(_list(data, "definitions", problems)))
           if d is not None]
    definitions = _builtin(data.get("builtin", not own), problems) + [
        definition for group in own for definition in group]
    seen: set[str] = set()
    for definition in definitions:
        if definition.name in seen:
            problems.append(f"definitions: {definition.name!r} is defined twice")
        seen.add(definition.name)
    runtimes = _choices(data, "runtime", RUNTIMES, problems)
    autograd = _choices(data, "autograd", AUTOGRAD_MODES, problems)
    threads = _threads(data.get("threads"), "threads", problems) if "threads" in data else None
    patterns = [(key, _regex(data.get(key) if key == "filter" else extra_filter, key, problems))
                for key in ("filter", "--filter")]
    given = {name: data[name] for name in MeasureSettings.names() if name in data}
    problems += settings_problems(given, MeasureSettings)
    if problems:
        raise SpecError(source, problems)
    settings = MeasureSettings(**given)
    check_cell_count(source, len(runtimes) * len(autograd) * sum(
        len(threads or definition.threads) for definition in definitions))
    benchmarks = expand(definitions, runtimes, autograd, threads)
    for key, pattern in patterns:
        if pattern is not None:
            benchmarks = [b for b in benchmarks if pattern.search(b.key)]
            if not benchmarks:
                raise SpecError(source, [f"{key}: {pattern.pattern!r} selects no benchmark"])
    return InstructionSpec(benchmarks, settings)


def _list(data: Mapping, key: str, problems: list[str]) -> list:
    value = data.get(key, [])
    if not isinstance(value, list):
        problems.append(f"{key}: expected a list, not {type(value).__name__}")
        return []
    return value


def _builtin(value: Any, problems: list[str]) -> list[Definition]:
    if value is True:
        return list(BUILTIN)
    if value is False:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.append("builtin: expected true, false or a list of names (globs)")
        return []
    names = [definition.name for definition in BUILTIN]
    for index, pattern in enumerate(value):
        if not fnmatch.filter(names, pattern):
            problems.append(f"builtin[{index}]: {pattern!r} matches no built-in definition; "
                            f"they are {', '.join(names)}")
    return [d for d in BUILTIN if any(fnmatch.fnmatchcase(d.name, p) for p in value)]


def _definition(item: Any, path: str, problems: list[str]) -> list[Definition] | None:
    """The definitions of one `definitions` entry (several for variants)."""
    if not isinstance(item, Mapping):
        problems.append(f"{path}: expected a mapping with name, setup and stmt/model/variants")
        return None
    before = len(problems)
    problems += [f"{path}.{key}: unknown key; known: {', '.join(sorted(DEFINITION_KEYS))}"
                 for key in item if key not in DEFINITION_KEYS]
    name = item.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[\w.-]+", name):
        problems.append(f"{path}.name: required, letters, digits, '_', '.' or '-', "
                        f"not {name!r}")
    bodies = [key for key in BODIES if key in item]
    if len(bodies) != 1:
        problems.append(f"{path}: needs exactly one of stmt, model or variants"
                        + (f", not {' and '.join(bodies)}" if bodies else ""))
    setup = _code(item.get("setup", ""), f"{path}.setup", problems)
    signature = None
    if "signature" in item:
        try:
            signature = Signature.parse(str(item["signature"]))
        except ValueError as error:
            problems.append(f"{path}.signature: {error}")
    elif "model" in item:
        problems.append(f"{path}.signature: required with model, e.g. 'f(x) -> y'")
    common: dict[str, Any] = {"setup": setup, "signature": signature}
    if "threads" in item:
        common["threads"] = _threads(item["threads"], f"{path}.threads", problems)
    if "number" in item:
        number = item["number"]
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            problems.append(f"{path}.number: must be an integer of at least 1, not {number!r}")
        common["number"] = number
    if "timeout_s" in item:
        timeout = item["timeout_s"]
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            problems.append(f"{path}.timeout_s: must be a positive number, not {timeout!r}")
        common["timeout_s"] = timeout
    stmts = {}
    if "stmt" in item:
        stmts[""] = _code(item["stmt"], f"{path}.stmt", problems)
    elif "model" in item:
        _code(item["model"], f"{path}.model", problems, mode="eval")
    elif "variants" in item:
        variants = item["variants"]
        if not isinstance(variants, Mapping) or not variants:
            problems.append(f"{path}.variants: expected a mapping of variant name to stmt")
        else:
            for variant, stmt in variants.items():
                if not re.fullmatch(r"[\w.-]+", str(variant)):
                    problems.append(f"{path}.variants: bad variant name {variant!r}")
                stmts[f"/{variant}"] = _code(stmt, f"{path}.variants.{variant}", problems)
    if len(problems) > before:
        return None
    if "model" in item:
        return [Definition(name, model=item["model"], **common)]
    return [Definition(f"{name}{suffix}", stmt=stmt, **common) for suffix, stmt in stmts.items()]


def _code(value: Any, path: str, problems: list[str], mode: str = "exec") -> str:
    if not isinstance(value, str) or (mode == "eval" and not value.strip()):
        problems.append(f"{path}: expected Python code as a string, not {value!r}")
        return ""
    try:
        compile(value, path, mode)
    except SyntaxError as error:
        problems.append(f"{path}: not valid Python: {error.msg} (line {error.lineno})")
    return value


def _choices(data: Mapping, key: str, known: tuple[str, ...],
             problems: list[str]) -> tuple[str, ...]:
    value = data.get(key, list(known))
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or any(v not in known for v in values):
        problems.append(f"{key}: expected some of {', '.join(known)}, not {value!r}")
        return known
    return tuple(dict.fromkeys(values))


def _threads(value: Any, path: str, problems: list[str]) -> tuple[int, ...]:
    values = [value] if isinstance(value, int) else value
    if not isinstance(values, list) or not values or any(
            isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
        problems.append(f"{path}: expected thread counts of at least 1, not {value!r}")
        return (1,)
    return tuple(dict.fromkeys(values))


def _regex(value: Any, key: str, problems: list[str]) -> re.Pattern | None:
    if value is None:
        return None
    try:
        return re.compile(str(value))
    except re.error as error:
        problems.append(f"{key}: not a valid regular expression: {error}")
        return None
