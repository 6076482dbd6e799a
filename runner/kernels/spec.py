"""Kernel specs (`family: kernels`), validated and expanded into cells; needs no torch.

    family: kernels
    kernels: [cross_entropy, softmax, rms_norm, layer_norm]   # default: all
    directions: [forward, backward]                          # default: both
    backends: [eager, compiled, liger, quack]                # default: eager, compiled
    compile_modes: [max-autotune-no-cudagraphs]              # for `compiled`; this default
    shapes: [[32768, 4096], "8192x16384"]                    # (M, N): required
    dtype: bfloat16                                          # float32, bfloat16, float16
    device: cuda                                             # cuda or cpu
    tolerance: {atol: 0.01, rtol: 0.01}   # or one number for both; default: DEFAULT_RTOL
    timing: {samples: 30, warmup_s: 0.1}  # runner.engine.timing_data.TimingSettings fields

A cell is one kernel, direction, shape and backend (one compile mode of `compiled`); eager
cells come first. Another backend's cell times eager again, interleaved with itself, for its
speedup (runner.engine.paired).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from runner.engine.run_settings import settings_problems
from runner.engine.specs import SpecError, check_cell_count
from runner.engine.timing_data import PER_CALL, TimingSettings
from runner.kernels.backends import BACKENDS, COMPILE_MODES, label
from runner.kernels.definitions import DIRECTIONS, DTYPES, KERNELS

KEYS = ("kernels", "directions", "backends", "compile_modes", "shapes", "dtype", "device",
        "tolerance", "timing")
DEVICES = ("cuda", "cpu")
DEFAULT_BACKENDS = ("eager", "compiled")
DEFAULT_COMPILE_MODE = "max-autotune-no-cudagraphs"
MAX_ELEMENTS = 2**34  # M * N: beyond any GPU's memory, so surely a typo
# Without a tolerance in the spec: this rtol, and an atol of rtol x the largest magnitude in
# the tensor. torch.testing's fixed atol fails weight gradients, sums over M rows whose
# rounding error grows with M; scaled to the tensor, the check holds at any M.
DEFAULT_RTOL = {"float32": 1e-4, "float16": 1e-3, "bfloat16": 1.6e-2}
# A fused kernel's bandwidth is read cold, as before CUDA graphs: each call alone between
# events, L2 flushed before it (runner.engine.gpu_blocks); a spec's `timing` may say otherwise.
DEFAULT_TIMING = {"gpu_method": PER_CALL}


@dataclass(frozen=True)
class KernelCell:
    kernel: str
    direction: str
    m: int
    n: int
    dtype: str
    device: str
    backend: str
    compile_mode: str | None = None  # only for `compiled`
    atol: float | None = None  # None (rtol None too): DEFAULT_RTOL, scaled atol
    rtol: float | None = None
    timing: dict[str, Any] = field(default_factory=dict)  # TimingSettings fields from the spec

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.n}"

    @property
    def label(self) -> str:
        return label(self.backend, self.compile_mode)

    @property
    def key(self) -> str:
        return "/".join([self.kernel, self.direction, self.shape, self.dtype, self.device,
                         self.label])

    def timing_settings(self, overrides: Mapping[str, Any] | None = None) -> TimingSettings:
        """The spec's timing under a job's `overrides`, over the kernels' DEFAULT_TIMING."""
        return TimingSettings(**{**DEFAULT_TIMING, **self.timing, **(overrides or {})})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KernelCell:
        return cls(**data)


def parse(data: Any, source: str) -> list[KernelCell]:
    """The cells of a spec (without its `family` key); SpecError listing every problem."""
    if not isinstance(data, Mapping):
        raise SpecError(source, ["the spec must be a mapping of keys to values"])
    problems = [f"{key}: unknown key; expected one of {', '.join(KEYS)}"
                for key in data if key not in KEYS]
    kernels = _names(data, "kernels", tuple(KERNELS), tuple(KERNELS), problems)
    directions = _names(data, "directions", DIRECTIONS, DIRECTIONS, problems)
    backends = _names(data, "backends", tuple(BACKENDS), DEFAULT_BACKENDS, problems)
    modes = _names(data, "compile_modes", COMPILE_MODES, (DEFAULT_COMPILE_MODE,), problems)
    if "compile_modes" in data and "compiled" not in backends:
        problems.append("compile_modes: given, but backends has no `compiled`")
    shapes = _shapes(data.get("shapes"), problems)
    dtype = _one_of(data, "dtype", DTYPES, "bfloat16", problems)
    device = _one_of(data, "device", DEVICES, "cuda", problems)
    atol, rtol = _tolerance(data.get("tolerance"), problems)
    timing = data.get("timing") or {}
    problems += settings_problems(timing, TimingSettings, "timing")
    if problems:
        raise SpecError(source, problems)
    ordered = sorted(backends, key=lambda name: name != "eager")
    variants = [(backend, mode) for backend in ordered
                for mode in (modes if BACKENDS[backend].compiles else (None,))]
    check_cell_count(source, len(kernels) * len(directions) * len(shapes) * len(variants))
    return [KernelCell(kernel, direction, m, n, dtype, device, backend, mode, atol, rtol,
                 dict(timing))
            for kernel in kernels for direction in directions for m, n in shapes
            for backend, mode in variants]


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


def _names(data: Mapping[str, Any], key: str, known: tuple[str, ...],
           default: tuple[str, ...], problems: list[str]) -> list[str]:
    value = data.get(key, list(default))
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        problems.append(f"{key}: must be a non-empty list drawn from {', '.join(known)}")
        return []
    names = []
    for i, name in enumerate(value):
        if name not in known:
            problems.append(f"{key}[{i}]: {name!r} is not one of {', '.join(known)}")
        elif name in names:
            problems.append(f"{key}[{i}]: {name!r} is listed twice")
        else:
            names.append(name)
    return names


def _one_of(data: Mapping[str, Any], key: str, known: tuple[str, ...], default: str,
            problems: list[str]) -> str:
    value = data.get(key, default)
    if isinstance(value, str):
        value = value.removeprefix("torch.")
    if value not in known:
        problems.append(f"{key}: {value!r} is not one of {', '.join(known)}")
    return value


def _shapes(raw: Any, problems: list[str]) -> list[tuple[int, int]]:
    if not isinstance(raw, list) or not raw:
        problems.append('shapes: required: a list of [M, N] or "MxN", e.g. [[32768, 4096]]')
        return []
    shapes: list[tuple[int, int]] = []
    for i, item in enumerate(raw):
        where = f"shapes[{i}]"
        if isinstance(item, str):
            found = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", item)
            item = [int(found[1]), int(found[2])] if found else item
        if not (isinstance(item, list) and len(item) == 2 and all(_integer(d) for d in item)):
            problems.append(f'{where}: {item!r} is not [M, N] or "MxN" (positive integers)')
        elif min(item) < 1 or item[0] * item[1] > MAX_ELEMENTS:
            problems.append(f"{where}: {item!r}: M and N must be at least 1, M*N at most "
                            f"{MAX_ELEMENTS}")
        elif tuple(item) in shapes:
            problems.append(f"{where}: {item[0]}x{item[1]} is listed twice")
        else:
            shapes.append((item[0], item[1]))
    return shapes


def _tolerance(raw: Any, problems: list[str]) -> tuple[float | None, float | None]:
    if raw is None:
        return None, None
    if _number(raw) and raw >= 0:
        return float(raw), float(raw)
    if not isinstance(raw, Mapping):
        problems.append("tolerance: must be a number (atol = rtol) or {atol: A, rtol: R}")
        return None, None
    found = []
    for key in raw:
        if key not in ("atol", "rtol"):
            problems.append(f"tolerance.{key}: unknown key; expected atol and rtol")
    for key in ("atol", "rtol"):
        value = raw.get(key)
        if not _number(value) or value < 0:
            problems.append(f"tolerance.{key}: required with the other: a number of at least 0")
            found.append(None)
        else:
            found.append(float(value))
    return found[0], found[1]
