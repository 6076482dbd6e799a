"""Every shape generator: counts, names, dimensions and torchao's defaults."""

import itertools

import pytest

from runner.quant.shapes import GENERATORS, Shape, generate


def test_custom_keeps_the_given_shapes_in_order():
    shapes = generate("custom", shapes=[[1024, 1024, 1024], [2048, 4096, 1024]])
    assert shapes == [Shape("custom", 1024, 1024, 1024), Shape("custom", 2048, 4096, 1024)]


def test_llama_is_llama2_70b_fused_weights_at_16k_tokens():
    assert [(s.name, s.m, s.k, s.n) for s in generate("llama")] == [
        ("llama_attn.wqkv", 16384, 8192, 1280),
        ("llama_attn.w0", 16384, 1024, 8192),
        ("llama_ffn.w13", 16384, 8192, 7168),
        ("llama_ffn.w2", 16384, 3584, 8192),
    ]


@pytest.mark.parametrize(
    ("family", "layers"),
    [
        ("llama4", {"FFN": (8192, 5120), "QO_proj": (8192, 8192), "KV_proj": (8192, 1024)}),
        ("deepseek_v3_236b", {"FFN": (1536, 5120), "QKVO_proj": (7168, 7168)}),
        ("deepseek_v3_671b", {"FFN": (2048, 7168), "QKVO_proj": (7168, 7168)}),
        ("qwen3_32b", {"QO_proj": (5120, 5120), "KV_proj": (5120, 640)}),
        ("gemma3_27b", {"QO_proj": (4096, 4096), "KV_proj": (4096, 1024)}),
    ],
)
def test_model_families_run_every_layer_at_16k_and_128k_tokens(family, layers):
    shapes = generate(family)
    assert len(shapes) == 2 * len(layers)
    expected = [
        Shape(f"{family}_{layer}_m{m}", m, k, n)
        for m in (16384, 128000)
        for layer, (k, n) in layers.items()
    ]
    assert shapes == expected


def test_pow2_defaults_to_square_shapes_from_1024_to_16384():
    shapes = generate("pow2")
    assert [s.name for s in shapes] == [f"pow2_{i}" for i in range(5)]
    assert [(s.m, s.k, s.n) for s in shapes] == [(2**p,) * 3 for p in range(10, 15)]


def test_pow2_extended_adds_the_one_and_a_half_sizes():
    shapes = generate("pow2_extended", min_power=10, max_power=11)
    assert [s.m for s in shapes] == [1024, 1536, 2048, 3072]
    assert all(s.m == s.k == s.n for s in shapes)
    assert [s.name for s in shapes] == [f"pow2_extended_{i}" for i in range(4)]
    assert len(generate("pow2_extended")) == 10


def test_small_sweep_is_every_m_le_k_le_n():
    shapes = generate("small_sweep")
    assert len(shapes) == 35  # 5 powers, 3 ordered picks with repetition
    assert all(s.m <= s.k <= s.n for s in shapes)
    assert {s.m for s in shapes} == {2**p for p in range(10, 15)}
    assert len(generate("small_sweep", min_power=10, max_power=15)) == 56
    assert shapes[0] == Shape("small_sweep_0", 1024, 1024, 1024)


def test_sweep_is_the_full_cube_with_defaults_256_to_32768():
    shapes = generate("sweep")
    assert len(shapes) == 8**3
    powers = [2**p for p in range(8, 16)]
    assert [(s.m, s.k, s.n) for s in shapes] == list(itertools.product(powers, repeat=3))
    assert shapes[-1].name == "sweep_511"
    assert len(generate("sweep", min_power=8, max_power=9)) == 8


def test_every_generator_is_covered():
    tested = {"custom", "llama", "llama4", "deepseek_v3_236b", "deepseek_v3_671b", "qwen3_32b",
              "gemma3_27b", "pow2", "pow2_extended", "small_sweep", "sweep"}
    assert set(GENERATORS) == tested


def test_shape_mkn():
    assert Shape("x", 1, 2, 3).mkn == "1-2-3"
