"""Benchmark specs: torchao's microbenchmark YAML, loaded, validated and expanded into cells.

A torchao config runs unchanged. Every problem is reported with the file and key path, all
problems at once; unknown keys and unknown recipes are errors, never silently ignored.
Loading needs only PyYAML.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from runner.engine.folders import path_problem
from runner.engine.run_settings import settings_problems
from runner.engine.specs import SpecError, check_cell_count, read_spec
from runner.engine.timing_data import TimingSettings
from runner.quant import allowed, models, recipes, shapes
from runner.quant.cells import QuantCell
from runner.quant.recipes import CustomRecipe, Requirements, UnknownRecipe

TOP_LEVEL_KEYS = {
    "benchmark_mode",
    "quantization_config_recipe_names",
    "sparsity_config_recipe_names",
    "output_dir",
    "model_params",
    "timing",  # ours: runner.engine.timing_data.TimingSettings fields (torchao's configs have none)
}
PARAM_KEYS = {
    "name",
    "matrix_shapes",
    "high_precision_dtype",
    "torch_compile_mode",
    "compile",  # older spelling of torch_compile_mode
    "use_torch_compile",  # older on/off switch
    "device",
    "model_type",
    "enable_profiler",
    "enable_memory_profiler",
}
CUSTOM_RECIPE_KEYS = {"name", "config", "kwargs", "sparsify", "requires"}
REQUIRES_KEYS = {"devices", "min_capability", "packages"}
DTYPES = ("bfloat16", "float16", "float32")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
NO_COMPILE = {"false", "none", "eager", "no", "off"}
DEVICES = ("cuda", "cpu", "mps", "xpu")  # torchao's options; the runner measures cuda and cpu
MAX_POWER = 20
DEFAULT_OUTPUT_DIR = "benchmarks/microbenchmarks/results"


class Pairing(NamedTuple):
    quantization: str
    sparsity: str | None
    custom: CustomRecipe | None = None


@dataclass(frozen=True)
class ParamSet:
    name: str
    shapes: tuple[shapes.Shape, ...]
    dtype: str
    compile_modes: tuple[str | None, ...]
    device: str
    model_types: tuple[str, ...]
    enable_profiler: bool
    enable_memory_profiler: bool


@dataclass(frozen=True)
class Spec:
    source: str
    benchmark_mode: str
    pairings: tuple[Pairing, ...]
    output_dir: str
    param_sets: tuple[ParamSet, ...]
    timing: Mapping[str, Any] = field(default_factory=dict)  # TimingSettings overrides

    def cells(self) -> list[QuantCell]:
        """Every cell, in torchao's order: parameter set, model type, shape, recipe, mode."""
        return [
            QuantCell(
                name=params.name,
                quantization=pairing.quantization,
                sparsity=pairing.sparsity,
                custom_recipe=pairing.custom,
                shape=shape,
                model_type=model_type,
                dtype=params.dtype,
                device=params.device,
                compile_mode=mode,
                output_dir=str(Path(self.output_dir) / self.benchmark_mode),
                benchmark_mode=self.benchmark_mode,
                enable_profiler=params.enable_profiler,
                enable_memory_profiler=params.enable_memory_profiler,
                timing=dict(self.timing),
            )
            for params in self.param_sets
            for model_type in params.model_types
            for shape in params.shapes
            for pairing in self.pairings
            for mode in params.compile_modes
        ]


def load_spec(path: str | Path) -> Spec:
    return parse_spec(read_spec(path), str(path))


def parse_spec(data: Any, source: str = "<spec>") -> Spec:
    """Validate a spec already parsed from YAML or JSON; raise SpecError listing all problems."""
    check = _Checker()
    if not isinstance(data, Mapping):
        raise SpecError(source, ["the spec must be a mapping of keys to values"])
    check.unknown_keys(data, TOP_LEVEL_KEYS, "")
    mode = data.get("benchmark_mode", "inference")
    if mode != "inference":
        check.problem("benchmark_mode", f"{mode!r}: only 'inference' is supported")
    output_dir = data.get("output_dir", DEFAULT_OUTPUT_DIR)
    problem = path_problem(output_dir)
    if problem:
        check.problem("output_dir", problem)
    pairings = _pairings(data, check)
    param_sets = _param_sets(data.get("model_params"), check)
    timing = data.get("timing") or {}
    check.problems += settings_problems(timing, TimingSettings, "timing")
    if check.problems:
        raise SpecError(source, check.problems)
    check_cell_count(source, len(pairings) * sum(
        len(p.model_types) * len(p.shapes) * len(p.compile_modes) for p in param_sets))
    return Spec(source, mode, tuple(pairings), output_dir, tuple(param_sets), dict(timing))


def check_custom_recipe(item: Any, path: str = "recipe") -> CustomRecipe:
    """A custom recipe mapping checked as a spec checks one; SpecError lists problems by key
    (`path.config`, `path.requires.devices`, ...). Imports nothing: see CustomRecipe.resolve."""
    check = _Checker()
    if not isinstance(item, Mapping):
        raise SpecError(path, ["must be a mapping with name, config and kwargs"])
    custom = _custom_recipe(item, path, check)
    if custom is None:
        raise SpecError(path, check.problems)
    return custom


class _Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def problem(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}" if path else message)

    def unknown_keys(self, data: Mapping[str, Any], allowed: set[str], path: str) -> None:
        for key in data:
            if key not in allowed:
                where = f"{path}.{key}" if path else str(key)
                self.problem(where, f"unknown key; expected one of {', '.join(sorted(allowed))}")

    def names(self, data: Mapping[str, Any], key: str) -> list[tuple[str, Any]]:
        """(path, item) for each entry of an optional list."""
        value = data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.problem(key, "must be a list")
            return []
        return [(f"{key}[{i}]", item) for i, item in enumerate(value)]


def _pairings(data: Mapping[str, Any], check: _Checker) -> list[Pairing]:
    quantizations: list[Pairing] = []
    for path, item in check.names(data, "quantization_config_recipe_names"):
        if isinstance(item, Mapping):
            custom = _custom_recipe(item, path, check)
            if custom:
                quantizations.append(Pairing(custom.name, None, custom))
        elif isinstance(item, str):
            try:
                recipes.check_quantization(item)
                quantizations.append(Pairing(item, None))
            except UnknownRecipe as error:
                check.problem(path, str(error))
        else:
            check.problem(path, "must be a recipe name or a mapping with name, config, kwargs")
    sparsities: list[str] = []
    for path, item in check.names(data, "sparsity_config_recipe_names"):
        if item is None:
            continue
        if not isinstance(item, str):
            check.problem(path, "must be a sparsity recipe name")
            continue
        try:
            recipes.sparsity_kind(item)
            sparsities.append(item)
        except UnknownRecipe as error:
            check.problem(path, str(error))
    if not quantizations and not sparsities and not check.problems:
        check.problem(
            "quantization_config_recipe_names", "no recipes: give at least one recipe name"
        )
    if not quantizations:
        quantizations = [Pairing("baseline", None)]
    seen: set[str] = set()
    pairings: list[Pairing] = []
    for pairing in quantizations:
        if pairing.quantization in seen:
            check.problem("quantization_config_recipe_names", f"{pairing.quantization!r} twice")
            continue
        seen.add(pairing.quantization)
        pairings.append(pairing)
        if pairing.custom is None:
            pairings += [
                Pairing(pairing.quantization, sparsity)
                for sparsity in dict.fromkeys(sparsities)
                if recipes.pairs_with(pairing.quantization, sparsity)
            ]
    return pairings


def _custom_recipe(item: Mapping[str, Any], path: str, check: _Checker) -> CustomRecipe | None:
    before = len(check.problems)
    check.unknown_keys(item, CUSTOM_RECIPE_KEYS, path)
    name, config = item.get("name"), item.get("config")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.:+-]+", name):
        check.problem(f"{path}.name", "required: letters, digits and _ . : + - only")
    else:
        try:
            recipes.check_quantization(name)
            check.problem(f"{path}.name", f"{name!r} is a built-in recipe; choose another name")
        except UnknownRecipe:
            pass
    problem = allowed.config_problem(config)
    if problem:
        check.problem(f"{path}.config", problem)
    kwargs = item.get("kwargs") or {}
    if not isinstance(kwargs, Mapping):
        check.problem(f"{path}.kwargs", "must be a mapping of argument names to values")
    else:
        check.problems += allowed.kwargs_problems(kwargs, f"{path}.kwargs")
    sparsify = item.get("sparsify", False)
    if not isinstance(sparsify, bool):
        check.problem(f"{path}.sparsify", "must be true or false")
    requires = _requires(item.get("requires") or {}, f"{path}.requires", check)
    if len(check.problems) > before:
        return None
    return CustomRecipe(name, config, dict(kwargs), sparsify, requires)


def _requires(data: Any, path: str, check: _Checker) -> Requirements:
    if not isinstance(data, Mapping):
        check.problem(path, "must be a mapping with devices, min_capability, packages")
        return Requirements()
    check.unknown_keys(data, REQUIRES_KEYS, path)
    devices = data.get("devices", sorted(recipes.ALL_DEVICES))
    if isinstance(devices, str):
        devices = [devices]
    known = recipes.ALL_DEVICES
    if not isinstance(devices, list) or not devices or not all(
        isinstance(device, str) and device in known for device in devices
    ):
        check.problem(f"{path}.devices", "must be a list drawn from cpu, cuda")
        devices = sorted(recipes.ALL_DEVICES)
    capability = None
    raw = data.get("min_capability")
    if raw is not None:
        found = re.fullmatch(r"(\d+)\.(\d+)", str(raw).strip())
        if isinstance(raw, list) and len(raw) == 2 and all(isinstance(x, int) for x in raw):
            capability = (raw[0], raw[1])
        elif found and not isinstance(raw, list):
            capability = (int(found[1]), int(found[2]))
        else:
            check.problem(f"{path}.min_capability", 'must look like "8.9" or [8, 9]')
    packages = data.get("packages", [])
    if not isinstance(packages, list) or not all(isinstance(p, str) for p in packages):
        check.problem(f"{path}.packages", "must be a list of importable module names")
        packages = []
    return Requirements(frozenset(devices), capability, tuple(packages))


def _param_sets(raw: Any, check: _Checker) -> list[ParamSet]:
    if raw is None:
        check.problem("model_params", "required: a mapping, or a list of named mappings")
        return []
    if isinstance(raw, Mapping):
        entries = [("model_params", raw)]
    elif isinstance(raw, list) and raw:
        entries = [(f"model_params[{i}]", item) for i, item in enumerate(raw)]
    else:
        check.problem("model_params", "must be a mapping or a non-empty list of mappings")
        return []
    param_sets = []
    for path, item in entries:
        if not isinstance(item, Mapping):
            check.problem(path, "must be a mapping")
            continue
        params = _param_set(item, path, check)
        if params and any(p.name == params.name for p in param_sets):
            check.problem(f"{path}.name", f"{params.name!r} is used by another parameter set")
        elif params:
            param_sets.append(params)
    return param_sets


def _param_set(data: Mapping[str, Any], path: str, check: _Checker) -> ParamSet | None:
    before = len(check.problems)
    check.unknown_keys(data, PARAM_KEYS, path)
    name = data.get("name", path)
    if not isinstance(name, str) or not name:
        check.problem(f"{path}.name", "must be a non-empty string")
    shape_list = _shapes(data.get("matrix_shapes"), f"{path}.matrix_shapes", check)
    dtype = str(data.get("high_precision_dtype", "torch.bfloat16")).removeprefix("torch.")
    if dtype not in DTYPES:
        allowed = ", ".join(f"torch.{name}" for name in DTYPES)
        check.problem(f"{path}.high_precision_dtype", f"must be one of {allowed}")
    device = data.get("device", "cuda")
    if device not in DEVICES:
        check.problem(f"{path}.device", f"{device!r}: must be one of {', '.join(DEVICES)}")
    model_types = data.get("model_type", "linear")
    model_types = [model_types] if isinstance(model_types, str) else model_types
    if not isinstance(model_types, list) or not model_types:
        check.problem(f"{path}.model_type", "must be a model type or a list of them")
        model_types = []
    for model_type in model_types:
        try:
            models.check_model_type(model_type)
        except ValueError as error:
            check.problem(f"{path}.model_type", str(error))
    flags = {}
    for key in ("enable_profiler", "enable_memory_profiler"):
        flags[key] = data.get(key, False)
        if not isinstance(flags[key], bool):
            check.problem(f"{path}.{key}", "must be true or false")
    modes = _compile_modes(data, path, check)
    if len(check.problems) > before:
        return None
    return ParamSet(
        name=name,
        shapes=tuple(shape_list),
        dtype=dtype,
        compile_modes=tuple(modes),
        device=device,
        model_types=tuple(dict.fromkeys(model_types)),
        **flags,
    )


def _compile_modes(data: Mapping[str, Any], path: str, check: _Checker) -> list[str | None]:
    """torch_compile_mode (or the older `compile`): a mode, a list of modes, or false.

    As in torchao, a missing mode means "default"; `use_torch_compile: false` turns it off.
    """
    if "torch_compile_mode" in data and "compile" in data:
        check.problem(path, "give torch_compile_mode or compile, not both")
    key = "torch_compile_mode" if "torch_compile_mode" in data else "compile"
    raw = data.get(key, "default")
    switch = data.get("use_torch_compile", True)
    if not isinstance(switch, bool):
        check.problem(f"{path}.use_torch_compile", "must be true or false")
    if switch is False:
        return [None]
    modes: list[str | None] = []
    for value in raw if isinstance(raw, list) else [raw]:
        if value is None or value is False or str(value).lower() in NO_COMPILE:
            modes.append(None)
        elif value is True:
            modes.append("default")
        elif value in COMPILE_MODES:
            modes.append(value)
        else:
            check.problem(
                f"{path}.{key}", f"{value!r}: must be false or one of {', '.join(COMPILE_MODES)}"
            )
    if raw == []:
        check.problem(f"{path}.{key}", "empty list: give a mode or false")
    return list(dict.fromkeys(modes))


def _shapes(raw: Any, path: str, check: _Checker) -> list[shapes.Shape]:
    if not isinstance(raw, list) or not raw:
        check.problem(path, "required: a list of shape generators, e.g. [{name: custom, ...}]")
        return []
    found: list[shapes.Shape] = []
    for i, entry in enumerate(raw):
        where = f"{path}[{i}]"
        if not isinstance(entry, Mapping):
            check.problem(where, "must be a mapping with a name")
            continue
        name = entry.get("name")
        generator = shapes.GENERATORS.get(name) if isinstance(name, str) else None
        if generator is None:
            known = ", ".join(shapes.GENERATORS)
            check.problem(f"{where}.name", f"{name!r}: unknown shape generator; known: {known}")
            continue
        before = len(check.problems)
        check.unknown_keys(entry, {"name", *generator.params}, where)
        params = {key: entry.get(key, default) for key, default in generator.params.items()}
        if "shapes" in params:
            _check_custom_shapes(params["shapes"], f"{where}.shapes", check)
        if "min_power" in params:
            for key in ("min_power", "max_power"):
                value = params[key]
                if not isinstance(value, int) or isinstance(value, bool):
                    check.problem(f"{where}.{key}", "must be an integer")
                elif not 1 <= value <= MAX_POWER:
                    check.problem(f"{where}.{key}", f"{value}: must be between 1 and {MAX_POWER}")
            low, high = params["min_power"], params["max_power"]
            if len(check.problems) == before and low > high:
                check.problem(where, f"min_power {low} is above max_power {high}")
        if len(check.problems) == before:
            found += shapes.generate(name, **params)
    return found


def _check_custom_shapes(value: Any, path: str, check: _Checker) -> None:
    if not isinstance(value, list) or not value:
        check.problem(path, "required: a list of [m, k, n]")
        return
    for i, shape in enumerate(value):
        valid = isinstance(shape, list) and len(shape) == 3
        if not valid or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0
                                for d in shape):
            check.problem(f"{path}[{i}]", f"{shape!r}: must be [m, k, n], positive integers")
