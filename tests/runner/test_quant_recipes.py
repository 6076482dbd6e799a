"""The recipe registry: names, pairing, what each recipe needs, and the configs it builds."""

import pytest

from runner.quant import recipes
from runner.quant.recipes import (
    CustomRecipe,
    Entry,
    Requirements,
    UnknownRecipe,
    pairs_with,
    resolve,
)
from runner.quant.spec import parse_spec


@pytest.mark.parametrize(
    "name",
    ["baseline", "int8wo", "int8dq", "int4wo-32", "int4wo-256-hqq", "float8wo",
     "float8dq-tensor", "float8dq-row"],
)
def test_registered_names_resolve_to_their_label(name):
    assert resolve(name).label == name


@pytest.mark.parametrize("name", ["int8", "int4wo", "int4wo-100", "int4wo-128-gptq",
                                  "float8dq", "xint8wo", "marlin", "Int8wo"])
def test_names_match_whole_never_falling_back_to_baseline(name):
    with pytest.raises(UnknownRecipe, match="unknown quantization recipe"):
        resolve(name)


def test_sparsity_pairs():
    assert resolve("baseline", "2:4").label == "baseline+2:4"
    assert resolve("float8dq-row", "semi-sparse").label == "float8dq-row+semi-sparse"
    assert pairs_with("int8dq", "2:4") and pairs_with("baseline", "block")
    assert not pairs_with("int8wo", "2:4") and not pairs_with("int8dq", "block")
    with pytest.raises(UnknownRecipe, match="does not combine"):
        resolve("int8wo", "2:4")
    with pytest.raises(UnknownRecipe, match="unknown sparsity recipe"):
        resolve("baseline", "dense")


def test_requirements_explain_what_is_missing():
    assert Requirements().unmet("cpu") is None
    assert recipes.CUDA_SM89.unmet("cpu") == "needs device cuda, the cell runs on cpu"
    needs_package = Requirements(packages=("surely_not_an_installed_module",))
    assert needs_package.unmet("cpu") == (
        "needs package surely_not_an_installed_module, not installed"
    )
    assert Requirements(unavailable="never here").unmet("cuda") == "never here"


def test_declared_requirements():
    assert resolve("int8wo").requires.unmet("cpu") is None
    assert resolve("float8wo").requires.unmet("cpu") is None
    assert resolve("int4wo-128").requires.min_capability == (8, 0)
    assert resolve("float8dq-row").requires.min_capability == (8, 9)
    assert resolve("float8dq-row", "2:4").requires.min_capability == (9, 0)
    assert resolve("baseline", "block").requires.packages == ("triton",)
    assert "no int8 dynamic 2:4" in resolve("int8dq", "2:4").requires.unmet("cuda")


def test_requirements_round_trip():
    req = Requirements(frozenset({"cuda"}), (9, 0), ("mslk",))
    assert Requirements.from_dict(req.to_dict()) == req


def test_a_new_recipe_is_one_entry(monkeypatch):
    entry = Entry(recipes._plain("torchao.quantization.Int8WeightOnlyConfig"), recipes.CUDA_SM80)
    monkeypatch.setitem(recipes.QUANTIZATION, "int8wo-cuda", entry)
    spec = parse_spec({
        "quantization_config_recipe_names": ["int8wo-cuda"],
        "model_params": {"matrix_shapes": [{"name": "llama"}]},
    })
    assert spec.cells()[0].recipe().requires == recipes.CUDA_SM80


@pytest.mark.torch
def test_built_configs_are_torchaos():
    import torch
    from torchao.quantization import (
        Float8DynamicActivationFloat8WeightConfig,
        Int4WeightOnlyConfig,
        Int8DynamicActivationInt8WeightConfig,
        Int8WeightOnlyConfig,
        PerRow,
        PerTensor,
    )
    from torchao.sparsity.sparse_api import BlockSparseWeightConfig, SemiSparseWeightConfig

    assert resolve("baseline").build() is None
    assert isinstance(resolve("int8wo").build(), Int8WeightOnlyConfig)
    assert isinstance(resolve("int8dq").build(), Int8DynamicActivationInt8WeightConfig)
    int4 = resolve("int4wo-64-hqq").build()
    assert isinstance(int4, Int4WeightOnlyConfig) and int4.group_size == 64
    assert int4.int4_packing_format == "tile_packed_to_4d"
    assert int4.int4_choose_qparams_algorithm == "hqq"
    assert resolve("int4wo-128").build().int4_choose_qparams_algorithm == "tinygemm"
    row = resolve("float8dq-row").build()
    assert isinstance(row, Float8DynamicActivationFloat8WeightConfig)
    assert all(isinstance(g, PerRow) for g in row.granularity)
    assert all(isinstance(g, PerTensor) for g in resolve("float8dq-tensor").build().granularity)
    sparse_row = resolve("float8dq-row", "2:4").build()
    assert sparse_row.packing_format == "sparse_2d_data_2d_metadata"
    semi = resolve("baseline", "2:4")
    assert semi.sparsify and isinstance(semi.build(), SemiSparseWeightConfig)
    assert isinstance(resolve("baseline", "block").build(), BlockSparseWeightConfig)

    custom = CustomRecipe(
        "f8-e5m2",
        "torchao.quantization.Float8WeightOnlyConfig",
        {"granularity": {"class": "torchao.quantization.PerTensor"},
         "weight_dtype": "torch.float8_e5m2"},
    )
    config = custom.resolve().build()
    assert isinstance(config.granularity, PerTensor)
    assert config.weight_dtype == torch.float8_e5m2


@pytest.mark.torch
@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("os.system", "'os.system' is not an allowed torchao config class"),
        ("torchao.quantization.PerRow", "is not an allowed torchao config class"),
    ],
)
def test_custom_recipes_only_build_torchao_configs(path, error):
    with pytest.raises((TypeError, ValueError), match=error):
        CustomRecipe("x", path).resolve().build()
