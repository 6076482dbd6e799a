"""Matrix shape generators of torchao's microbenchmark configs (`matrix_shapes` entries).

A shape is [M, K, N]: an (M, K) input through a K -> N layer. Generators and defaults follow
torchao's `benchmarks/microbenchmarks`, so an existing config expands to the same shapes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    name: str
    m: int
    k: int
    n: int

    @property
    def mkn(self) -> str:
        return f"{self.m}-{self.k}-{self.n}"


# LLaMa 2 70B single-node weights with fused attn.wqkv and ffn.w13, batch 4 x 4096 tokens.
LLAMA2_70B_M = 4 * 4096
LLAMA2_70B_LAYERS = {
    "attn.wqkv": (8192, 1280),
    "attn.w0": (1024, 8192),
    "ffn.w13": (8192, 7168),
    "ffn.w2": (3584, 8192),
}

# Model families measured at two token counts: a 16K prefill and a 128K one.
MODEL_M_VALUES = (16384, 128000)
MODEL_LAYERS: dict[str, dict[str, tuple[int, int]]] = {
    "llama4": {"FFN": (8192, 5120), "QO_proj": (8192, 8192), "KV_proj": (8192, 1024)},
    "deepseek_v3_236b": {"FFN": (1536, 5120), "QKVO_proj": (7168, 7168)},
    "deepseek_v3_671b": {"FFN": (2048, 7168), "QKVO_proj": (7168, 7168)},
    "qwen3_32b": {"QO_proj": (5120, 5120), "KV_proj": (5120, 640)},
    "gemma3_27b": {"QO_proj": (4096, 4096), "KV_proj": (4096, 1024)},
}


def _custom(name: str, shapes: list[list[int]]) -> list[Shape]:
    return [Shape(name, m, k, n) for m, k, n in shapes]


def _llama(name: str) -> list[Shape]:
    return [
        Shape(f"{name}_{layer}", LLAMA2_70B_M, k, n) for layer, (k, n) in LLAMA2_70B_LAYERS.items()
    ]


def _model_family(name: str) -> list[Shape]:
    return [
        Shape(f"{name}_{layer}_m{m}", m, k, n)
        for m in MODEL_M_VALUES
        for layer, (k, n) in MODEL_LAYERS[name].items()
    ]


def _pow2(name: str, min_power: int, max_power: int) -> list[Shape]:
    sizes = [2**p for p in range(min_power, max_power + 1)]
    return [Shape(f"{name}_{i}", s, s, s) for i, s in enumerate(sizes)]


def _pow2_extended(name: str, min_power: int, max_power: int) -> list[Shape]:
    sizes = [s for p in range(min_power, max_power + 1) for s in (2**p, 2**p + 2 ** (p - 1))]
    return [Shape(f"{name}_{i}", s, s, s) for i, s in enumerate(sizes)]


def _small_sweep(name: str, min_power: int, max_power: int) -> list[Shape]:
    sizes = [2**p for p in range(min_power, max_power + 1)]
    mkn = itertools.combinations_with_replacement(sizes, 3)  # every M <= K <= N
    return [Shape(f"{name}_{i}", m, k, n) for i, (m, k, n) in enumerate(mkn)]


def _sweep(name: str, min_power: int, max_power: int) -> list[Shape]:
    sizes = [2**p for p in range(min_power, max_power + 1)]
    mkn = itertools.product(sizes, repeat=3)
    return [Shape(f"{name}_{i}", m, k, n) for i, (m, k, n) in enumerate(mkn)]


@dataclass(frozen=True)
class Generator:
    expand: Callable[..., list[Shape]]
    params: Mapping[str, int | None]  # accepted keys and their defaults; None: required


POWERS_10_14 = {"min_power": 10, "max_power": 14}
GENERATORS: dict[str, Generator] = {
    "custom": Generator(_custom, {"shapes": None}),
    "llama": Generator(_llama, {}),
    **{family: Generator(_model_family, {}) for family in MODEL_LAYERS},
    "pow2": Generator(_pow2, POWERS_10_14),
    "pow2_extended": Generator(_pow2_extended, POWERS_10_14),
    "small_sweep": Generator(_small_sweep, POWERS_10_14),
    "sweep": Generator(_sweep, {"min_power": 8, "max_power": 15}),
}


def generate(name: str, **params: object) -> list[Shape]:
    """Shapes of one `matrix_shapes` entry; `params` must already be validated."""
    generator = GENERATORS[name]
    arguments = {key: params.get(key, default) for key, default in generator.params.items()}
    return generator.expand(name, **arguments)
