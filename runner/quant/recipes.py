"""The recipe registry: what each recipe name applies to a model, and what a machine needs for it.

Recipe names are torchao's microbenchmark strings, matched whole (torchao matched substrings
and ran unknown names as the baseline; here an unknown name is an error). torchao is imported
only when a config is built, so specs can be loaded and checked without torch installed.

Adding a recipe is one entry in QUANTIZATION (or SPARSE_PAIRS for a quantization+sparsity
pair). A recipe can also be given in a spec as a torchao config class path plus keyword
arguments (`CustomRecipe`), which is how admin-managed recipes plug in.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.contract.names import QUANT_BASELINE_RECIPE
from runner.quant import allowed

ALL_DEVICES = frozenset({"cpu", "cuda"})


class UnknownRecipe(ValueError):
    pass


@dataclass(frozen=True)
class Requirements:
    """What a machine needs to run a recipe; unmet ones make a cell "skipped"."""

    devices: frozenset[str] = ALL_DEVICES
    min_capability: tuple[int, int] | None = None  # CUDA compute capability
    packages: tuple[str, ...] = ()
    unavailable: str | None = None  # why no machine can run it with this torchao

    def unmet(self, device: str) -> str | None:
        """Why `device` on this machine cannot run the recipe; None when it can.

        The caller has checked that the device itself is present.
        """
        if self.unavailable:
            return self.unavailable
        if device not in self.devices:
            return f"needs device {' or '.join(sorted(self.devices))}, the cell runs on {device}"
        missing = [name for name in self.packages if importlib.util.find_spec(name) is None]
        if missing:
            return f"needs package {', '.join(missing)}, not installed"
        if device == "cuda" and self.min_capability:
            import torch  # torch: specs are checked without it

            have = torch.cuda.get_device_capability()
            if have < self.min_capability:
                need = ".".join(map(str, self.min_capability))
                name = torch.cuda.get_device_name()
                return f"needs CUDA compute capability >= {need}, {name} has {have[0]}.{have[1]}"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "devices": sorted(self.devices),
            "min_capability": list(self.min_capability) if self.min_capability else None,
            "packages": list(self.packages),
            "unavailable": self.unavailable,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Requirements:
        capability = data.get("min_capability")
        return cls(
            devices=frozenset(data.get("devices") or ALL_DEVICES),
            min_capability=(int(capability[0]), int(capability[1])) if capability else None,
            packages=tuple(data.get("packages") or ()),
            unavailable=data.get("unavailable"),
        )


CUDA_SM80 = Requirements(devices=frozenset({"cuda"}), min_capability=(8, 0))
CUDA_SM89 = Requirements(devices=frozenset({"cuda"}), min_capability=(8, 9))
CUDA_SM90 = Requirements(devices=frozenset({"cuda"}), min_capability=(9, 0))


@dataclass(frozen=True)
class Recipe:
    """A resolved recipe, ready to apply to a model."""

    label: str  # the recipe part of record names: "int8dq", "int8dq+2:4", a custom name
    make_config: Callable[[], Any] | None  # None: the model stays in high precision
    requires: Requirements
    sparsify: bool = False  # applied with torchao.sparsity.sparsify_ rather than quantize_

    @property
    def is_baseline(self) -> bool:
        return self.make_config is None

    def build(self) -> Any | None:
        """The torchao config (None for the baseline); built before any model, to fail early."""
        return None if self.make_config is None else self.make_config()

    def apply(self, model: Any, config: Any | None) -> None:
        if config is None:
            return
        if self.sparsify:
            from torchao.sparsity import sparsify_  # torchao: only when a cell runs

            sparsify_(model, config)
        else:
            from torchao.quantization import quantize_  # torchao: only when a cell runs

            quantize_(model, config)


def import_object(path: str) -> Any:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _plain(path: str) -> Callable[[re.Match[str]], Any]:
    return lambda _match: import_object(path)()


def _int4wo(match: re.Match[str]) -> Any:
    # The tinygemm layout: torchao's int4wo recipe before the mslk-only default of 0.18.
    config = import_object("torchao.quantization.Int4WeightOnlyConfig")
    return config(
        group_size=int(match["group_size"]),
        int4_packing_format="tile_packed_to_4d",
        int4_choose_qparams_algorithm="hqq" if match["hqq"] else "tinygemm",
    )


def _float8dq(granularity: str, packing_format: str = "plain") -> Callable[[re.Match], Any]:
    def build(_match: re.Match[str]) -> Any:
        config = import_object("torchao.quantization.Float8DynamicActivationFloat8WeightConfig")
        scale = import_object(f"torchao.quantization.{granularity}")()
        return config(granularity=scale, packing_format=packing_format)

    return build


@dataclass(frozen=True)
class Entry:
    build: Callable[[re.Match[str]], Any] | None  # None: no config, the model is unchanged
    requires: Requirements = Requirements()
    sparsify: bool = False
    pattern: str | None = None  # full-match regex over recipe names; default: the key itself
    form: str | None = None  # how the name is written, for error messages


QUANTIZATION: dict[str, Entry] = {
    QUANT_BASELINE_RECIPE: Entry(None),
    "int8wo": Entry(_plain("torchao.quantization.Int8WeightOnlyConfig")),
    "int8dq": Entry(_plain("torchao.quantization.Int8DynamicActivationInt8WeightConfig")),
    "int4wo": Entry(
        _int4wo,
        CUDA_SM80,
        pattern=r"int4wo-(?P<group_size>32|64|128|256)(?P<hqq>-hqq)?",
        form="int4wo-<32|64|128|256>[-hqq]",
    ),
    "float8wo": Entry(_plain("torchao.quantization.Float8WeightOnlyConfig")),
    "float8dq-tensor": Entry(_float8dq("PerTensor"), CUDA_SM89),
    "float8dq-row": Entry(_float8dq("PerRow"), CUDA_SM89),
}

SPARSITY_KINDS = {"semi-sparse": "2:4", "semi": "2:4", "2:4": "2:4", "block": "block"}

# (quantization key, sparsity kind) -> recipe; torchao pairs no other combinations.
SPARSE_PAIRS: dict[tuple[str, str], Entry] = {
    ("baseline", "2:4"): Entry(
        _plain("torchao.sparsity.sparse_api.SemiSparseWeightConfig"), CUDA_SM80, sparsify=True
    ),
    ("baseline", "block"): Entry(
        _plain("torchao.sparsity.sparse_api.BlockSparseWeightConfig"),
        Requirements(devices=frozenset({"cuda"}), packages=("triton",)),
        sparsify=True,
    ),
    ("int8dq", "2:4"): Entry(
        None, Requirements(unavailable="torchao 0.18 has no int8 dynamic 2:4 sparse layout")
    ),
    ("float8dq-row", "2:4"): Entry(_float8dq("PerRow", "sparse_2d_data_2d_metadata"), CUDA_SM90),
    ("float8dq-tensor", "2:4"): Entry(
        None, Requirements(unavailable="float8 per-tensor 2:4 sparsity is ROCm-only in torchao")
    ),
}


def _match(name: str) -> tuple[str, Entry, re.Match[str]]:
    for key, entry in QUANTIZATION.items():
        found = re.fullmatch(entry.pattern or re.escape(key), name)
        if found:
            return key, entry, found
    known = ", ".join(entry.form or key for key, entry in QUANTIZATION.items())
    raise UnknownRecipe(
        f"unknown quantization recipe {name!r}; known: {known}, or a mapping with "
        "name, config (a torchao config class path) and kwargs"
    )


def sparsity_kind(name: str) -> str:
    try:
        return SPARSITY_KINDS[name]
    except KeyError:
        raise UnknownRecipe(
            f"unknown sparsity recipe {name!r}; known: {', '.join(SPARSITY_KINDS)}"
        ) from None


def check_quantization(name: str) -> None:
    """Raise UnknownRecipe unless `name` is a registered quantization recipe."""
    _match(name)


def pattern_of(name: str) -> str:
    """The QUANTIZATION key whose name or pattern `name` is; UnknownRecipe when none."""
    return _match(name)[0]


def pairs_with(quantization: str, sparsity: str) -> bool:
    """Whether torchao runs this quantization recipe combined with this sparsity recipe."""
    key, _, _ = _match(quantization)
    return (key, sparsity_kind(sparsity)) in SPARSE_PAIRS


def resolve(quantization: str, sparsity: str | None = None) -> Recipe:
    key, entry, found = _match(quantization)
    label = quantization
    if sparsity is not None:
        pair = (key, sparsity_kind(sparsity))
        if pair not in SPARSE_PAIRS:
            raise UnknownRecipe(f"{quantization!r} does not combine with sparsity {sparsity!r}")
        entry = SPARSE_PAIRS[pair]
        label = f"{quantization}+{sparsity}"
    build = entry.build
    make_config = None if build is None else (lambda: build(found))
    return Recipe(label, make_config, entry.requires, entry.sparsify)


@dataclass(frozen=True)
class CustomRecipe:
    """A recipe given as a torchao config class path and its keyword arguments.

    Keyword values are plain data: a mapping {"class": PATH, "kwargs": {...}} builds an object
    (e.g. a granularity) and a "torch.<dtype>" string becomes that dtype; the class paths and
    dtypes are those runner.quant.allowed lists.
    """

    name: str
    config: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    sparsify: bool = False
    requires: Requirements = Requirements()

    def resolve(self) -> Recipe:
        return Recipe(self.name, self._make_config, self.requires, self.sparsify)

    def config_class(self) -> type:
        """The torchao config class `config` names; ValueError, before any import, unless it
        is an allowed one (runner.quant.allowed)."""
        problem = allowed.config_problem(self.config)
        if problem:
            raise ValueError(problem)
        from torchao.core.config import AOBaseConfig  # torchao: not for spec checks

        config_class = import_object(self.config)
        if not (isinstance(config_class, type) and issubclass(config_class, AOBaseConfig)):
            raise TypeError(f"{self.config} is not a torchao AOBaseConfig class")
        return config_class

    def _make_config(self) -> Any:
        config_class = self.config_class()
        problems = allowed.kwargs_problems(self.kwargs, "kwargs")
        if problems:
            raise ValueError("; ".join(problems))
        return config_class(**{key: _build_value(v) for key, v in self.kwargs.items()})

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "config": self.config,
            "kwargs": dict(self.kwargs),
            "sparsify": self.sparsify,
            "requires": self.requires.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CustomRecipe:
        return cls(
            name=data["name"],
            config=data["config"],
            kwargs=dict(data.get("kwargs") or {}),
            sparsify=bool(data.get("sparsify", False)),
            requires=Requirements.from_dict(data.get("requires") or {}),
        )


def _build_value(value: Any) -> Any:
    """A keyword argument's value, built; checked by allowed.argument_problems first."""
    if isinstance(value, Mapping) and "class" in value:
        arguments = value.get("kwargs") or {}
        built = {k: _build_value(v) for k, v in arguments.items()}
        return import_object(value["class"])(**built)
    if isinstance(value, Mapping):
        return {key: _build_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_build_value(item) for item in value]
    if isinstance(value, str) and value.startswith(allowed.DTYPE_PREFIX):
        import torch  # torch: specs are checked without it

        return getattr(torch, value.removeprefix(allowed.DTYPE_PREFIX))
    return value
