"""What a custom recipe may name: torchao's config classes, the classes their arguments take,
and dtypes, each by its public path in torchao 0.18.

A recipe comes from a spec or the admin, so from whoever may submit one. Its `config`, and
every `{class: PATH, kwargs: {...}}` at any depth of its `kwargs`, are checked against these
lists as strings, before anything is imported: when a spec is planned (runner.quant.spec, for
the API, the admin and the CLI alike) and again when a worker builds the config
(runner.quant.recipes). Anything else torchao's modules hold (loaders, `import_module`,
quantize_) is out of reach. A new torchao config is one entry here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CONFIGS = frozenset({
    *(f"torchao.quantization.{name}" for name in (
        "Float8DynamicActivationFloat8WeightConfig",
        "Float8DynamicActivationInt4WeightConfig",
        "Float8StaticActivationFloat8WeightConfig",
        "Float8WeightOnlyConfig",
        "Int4WeightOnlyConfig",
        "Int8DynamicActivationInt8WeightConfig",
        "Int8DynamicActivationIntxWeightConfig",
        "Int8StaticActivationInt8WeightConfig",
        "Int8WeightOnlyConfig",
        "IntxWeightOnlyConfig",
    )),
    "torchao.sparsity.sparse_api.BlockSparseWeightConfig",
    "torchao.sparsity.sparse_api.SemiSparseWeightConfig",
})
# The objects configs take as arguments: granularities and the float8 matmul settings.
ARGUMENTS = frozenset(f"torchao.quantization.{name}" for name in (
    "Float8MMConfig", "PerAxis", "PerBlock", "PerGroup", "PerRow", "PerTensor", "PerToken"))
# "torch.NAME" strings that become dtypes; any other "torch." string is refused.
DTYPES = frozenset({
    "bfloat16", "float16", "float32", "float64", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2", "bool",
    *(f"int{bits}" for bits in (1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64)),
    *(f"uint{bits}" for bits in (1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64)),
})
DTYPE_PREFIX = "torch."
MAX_DEPTH = 8  # of nested kwargs: torchao's configs nest two levels at most
OBJECT_KEYS = {"class", "kwargs"}


def listed(paths: frozenset[str]) -> str:
    """`paths` as "module.{A, B} or other.{C}"."""
    modules: dict[str, list[str]] = {}
    for path in sorted(paths):
        module, _, name = path.rpartition(".")
        modules.setdefault(module, []).append(name)
    return " or ".join(f"{module}.{{{', '.join(names)}}}" for module, names in modules.items())


def config_problem(config: Any) -> str | None:
    """Why `config` is no config class a recipe may name; None when it is one."""
    if isinstance(config, str) and config in CONFIGS:
        return None
    return (f"{repr(config)[:100]} is not an allowed torchao config class; give its full "
            f"path, one of {listed(CONFIGS)}")


def kwargs_problems(kwargs: Mapping[Any, Any], path: str) -> list[str]:
    """Problems of a recipe's `kwargs`: argument names, and each value (argument_problems)."""
    problems = [f"{path}: {repr(key)[:100]} is no argument name"
                for key in kwargs if not (isinstance(key, str) and key.isidentifier())]
    for key, value in kwargs.items():
        problems += argument_problems(value, f"{path}.{key}"[:200], 1)
    return problems


def argument_problems(value: Any, path: str, depth: int) -> list[str]:
    """Problems of a recipe's keyword argument `value` (at `path`), at any depth: objects name
    only ARGUMENTS, "torch." strings only DTYPES, and the rest is plain data."""
    if depth > MAX_DEPTH:
        return [f"{path}: nested deeper than {MAX_DEPTH} levels"]
    if isinstance(value, Mapping):
        if "class" in value:
            return _object_problems(value, path, depth)
        problems = [f"{path}: keys must be names, not {key!r}"[:200]
                    for key in value if not isinstance(key, str)]
        for key, item in value.items():
            problems += argument_problems(item, f"{path}.{key}"[:200], depth + 1)
        return problems
    if isinstance(value, list):
        return [problem for index, item in enumerate(value)
                for problem in argument_problems(item, f"{path}[{index}]", depth + 1)]
    if isinstance(value, str) and value.startswith(DTYPE_PREFIX):
        if value.removeprefix(DTYPE_PREFIX) in DTYPES:
            return []
        return [f"{path}: {value[:100]!r} is no torch dtype (torch.bfloat16, torch.int8, "
                "torch.float8_e4m3fn, ...)"]
    if value is None or isinstance(value, bool | int | float | str):
        return []
    return [f"{path}: {type(value).__name__} is not plain data (numbers, text, lists, "
            "mappings and {class, kwargs} objects)"]


def _object_problems(value: Mapping[str, Any], path: str, depth: int) -> list[str]:
    problems = [f"{path}.{key}: unknown key of an object; expected class and kwargs"[:200]
                for key in value if key not in OBJECT_KEYS]
    name = value["class"]
    if not (isinstance(name, str) and name in ARGUMENTS):
        problems.append(f"{path}.class: {repr(name)[:100]} is not an allowed argument class; "
                        f"one of {listed(ARGUMENTS)}")
    arguments = value.get("kwargs") or {}
    if not isinstance(arguments, Mapping):
        return [*problems, f"{path}.kwargs: must be a mapping of argument names to values"]
    return problems + argument_problems(arguments, f"{path}.kwargs", depth + 1)
