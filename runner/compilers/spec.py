"""The YAML spec of an experiment matrix (`family: compilers`), validated with every problem
listed, and expanded into configurations. Needs no torch.

    family: compilers
    models: [builtin]            # suites, built-in names, torchbench/NAME, module:factory, or
                                 # {factory: module:function, name, batch_size, tolerance,
                                 #  cosine, skip_verifier}
    filter: []                   # regexes on model names (any may match); default: all
    exclude: []                  # regexes on model names (none may match)
    backends: [eager, inductor]  # eager, inductor, inductor_max_autotune, aot_eager, mod:fn
    tests: [eval, train]
    dtypes: [float32]            # float32, bfloat16, float16
    device: cpu                  # cpu or cuda
    batch_size: null             # null: each model's default
    repeat: 10
    iterations_per_run: 1
    verify: false
    dump_pytorch_profiles: false
    timeout: 600                 # seconds per configuration
    threads: null                # CPU: torch threads (1 gives steadier times on a busy
                                 # machine); null: torch's default
    output_dir: output           # profiles go here
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from runner.compilers import models
from runner.compilers.matrix import DEVICES, DTYPES, EAGER, TESTS, Config, check_backend, expand
from runner.engine.folders import path_problem
from runner.engine.specs import SpecError, check_cell_count

DEFAULTS: dict[str, Any] = {
    "models": [models.BUILTIN], "filter": [], "exclude": [], "backends": [EAGER, "inductor"],
    "tests": list(TESTS), "dtypes": ["float32"], "device": "cpu", "batch_size": None,
    "repeat": 10, "iterations_per_run": 1, "verify": False, "dump_pytorch_profiles": False,
    "timeout": 600, "output_dir": "output", "threads": None,
}
MODEL_KEYS = {"factory", "name", "batch_size", "tolerance", "cosine", "skip_verifier"}


def parse(data: Any, source: str) -> list[Config]:
    if not isinstance(data, Mapping):
        raise SpecError(source, ["the spec must be a mapping of keys to values"])
    problems = [f"{key}: unknown key; expected one of {', '.join(sorted(DEFAULTS))}"
                for key in data if key not in DEFAULTS]
    values = {**DEFAULTS, **{k: v for k, v in data.items() if k in DEFAULTS}}
    refs = []
    for index, entry in enumerate(_list(values, "models", problems)):
        refs += _model(entry, f"models[{index}]", problems)
    lists = {key: [str(item) for item in _list(values, key, problems)]
             for key in ("filter", "exclude", "backends", "tests", "dtypes")}
    for key, allowed in (("tests", TESTS), ("dtypes", DTYPES)):
        problems += [f"{key}: {item!r} is not one of {', '.join(allowed)}"
                     for item in lists[key] if item not in allowed]
    for item in lists["backends"]:
        try:
            check_backend(item)
        except ValueError as error:
            problems.append(f"backends: {error}")
    for key in ("backends", "tests", "dtypes"):
        if not lists[key] and key in data:
            problems.append(f"{key}: must name at least one")
    problems += _patterns(lists["filter"] + lists["exclude"])
    if values["device"] not in DEVICES:
        problems.append(f"device: {values['device']!r} is not one of {', '.join(DEVICES)}")
    for key in ("repeat", "iterations_per_run"):
        if not _positive_int(values[key]):
            problems.append(f"{key}: must be a whole number of at least 1")
    for key in ("batch_size", "threads"):
        if values[key] is not None and not _positive_int(values[key]):
            problems.append(f"{key}: must be a whole number of at least 1, or null")
    if isinstance(values["timeout"], bool) or not isinstance(values["timeout"], int | float) \
            or values["timeout"] <= 0:
        problems.append("timeout: must be a number of seconds above 0")
    for key in ("verify", "dump_pytorch_profiles"):
        if not isinstance(values[key], bool):
            problems.append(f"{key}: must be true or false")
    problem = path_problem(values["output_dir"])
    if problem:
        problems.append(f"output_dir: {problem}")
    if problems:
        raise SpecError(source, problems)
    check_cell_count(source, len(refs) * len(set(lists["backends"])) * len(set(lists["tests"]))
                     * len(set(lists["dtypes"])))
    return expand(refs, lists["backends"], lists["tests"], lists["dtypes"], lists["filter"],
                  lists["exclude"], device=values["device"], batch_size=values["batch_size"],
                  repeat=values["repeat"], iterations_per_run=values["iterations_per_run"],
                  verify=values["verify"],
                  dump_pytorch_profiles=values["dump_pytorch_profiles"],
                  timeout_s=float(values["timeout"]), output_dir=values["output_dir"],
                  threads=values["threads"])


def _list(values: dict[str, Any], key: str, problems: list[str]) -> list[Any]:
    value = values[key]
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        problems.append(f"{key}: must be a list")
        return []
    return value


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _patterns(patterns: list[str]) -> list[str]:
    problems = []
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as error:
            problems.append(f"filter/exclude: {pattern!r} is not a regular expression: {error}")
    return problems


def _model(entry: Any, path: str, problems: list[str]) -> list[models.ModelRef]:
    if isinstance(entry, str):
        try:
            return models.resolve(entry)
        except ValueError as error:
            problems.append(f"{path}: {error}")
            return []
    if not isinstance(entry, Mapping):
        problems.append(f"{path}: must be a name or a mapping with a factory")
        return []
    before = len(problems)
    problems += [f"{path}.{key}: unknown key; expected one of {', '.join(sorted(MODEL_KEYS))}"
                 for key in entry if key not in MODEL_KEYS]
    factory = entry.get("factory")
    if not isinstance(factory, str) or not models.FACTORY.match(factory):
        problems.append(f"{path}.factory: must be module.path:function")
    if "batch_size" in entry and not _positive_int(entry["batch_size"]):
        problems.append(f"{path}.batch_size: must be a whole number of at least 1")
    tolerance = entry.get("tolerance")
    if tolerance is not None and (isinstance(tolerance, bool)
                                  or not isinstance(tolerance, int | float) or tolerance < 0):
        problems.append(f"{path}.tolerance: must be a number of at least 0")
    for key in ("cosine", "skip_verifier"):
        if not isinstance(entry.get(key, False), bool):
            problems.append(f"{path}.{key}: must be true or false")
    if "name" in entry and (not isinstance(entry["name"], str)
                            or not re.fullmatch(r"[\w.+-]+", entry["name"])
                            or entry["name"] in (".", "..")):
        problems.append(f"{path}.name: letters, digits, '_', '.', '+' and '-' only (it names "
                        "the model's folder of profiles)")
    if len(problems) > before:
        return []
    options = {key: entry[key] for key in MODEL_KEYS - {"factory"} if key in entry}
    return [models.custom(factory, **options)]
