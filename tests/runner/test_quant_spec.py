"""Spec loading: torchao's configs unchanged, expansion into cells, and every validation error."""

import json
import textwrap

import pytest
from conftest import FIXTURES

from runner.quant.cells import QuantCell
from runner.quant.spec import SpecError, load_spec, parse_spec

MINIMAL = {
    "quantization_config_recipe_names": ["int8wo"],
    "model_params": {"matrix_shapes": [{"name": "custom", "shapes": [[16, 32, 64]]}],
                     "device": "cpu", "torch_compile_mode": False},
}


def spec_with(**changes):
    data = json.loads(json.dumps(MINIMAL))
    params = changes.pop("params", {})
    data.update(changes)
    if params:
        data["model_params"].update(params)
    return data


def problems(data) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_spec(data, "spec.yml")
    return caught.value.problems


def test_torchao_readme_example_loads_unchanged():
    spec = load_spec(FIXTURES / "torchao" / "readme_example.yml")
    cells = spec.cells()
    assert len(cells) == 4 * 3
    assert {c.label for c in cells} == {"baseline", "int8wo", "int4wo-128", "int4wo-128-hqq"}
    assert {c.compile_mode for c in cells} == {"max-autotune"}  # from the older `compile` key
    assert {c.device for c in cells} == {"cuda"}
    assert cells[0].output_dir == "benchmarks/microbenchmarks/results/inference"
    assert cells[0].name == "model_params"  # a single mapping, unnamed


def test_torchao_dashboard_config_loads_unchanged():
    cells = load_spec(FIXTURES / "torchao" / "dashboard_ci.yml").cells()
    assert len(cells) == 5 * 56  # small_sweep over powers 10..15
    assert {c.name for c in cells} == {"small_bf16_linear"}
    assert cells[0].quantization == "int8wo" and cells[0].shape.mkn == "1024-1024-1024"


@pytest.mark.parametrize("name", ["cpu_small.yml", "cuda_quant.yml"])
def test_example_specs_load(name):
    assert load_spec(FIXTURES / name).cells()


def test_cells_are_ordered_params_model_shape_recipe_mode():
    spec = parse_spec(spec_with(
        quantization_config_recipe_names=["baseline", "int8dq"],
        params={"model_type": ["linear", "ln_linear_gelu"],
                "torch_compile_mode": [False, "default"],
                "matrix_shapes": [{"name": "custom", "shapes": [[16, 32, 64], [32, 32, 32]]}]},
    ))
    keys = [c.key for c in spec.cells()]
    assert len(keys) == len(set(keys)) == 2 * 2 * 2 * 2
    assert keys[:3] == [
        "model_params/linear/baseline/16-32-64/bfloat16/cpu/eager",
        "model_params/linear/baseline/16-32-64/bfloat16/cpu/default",
        "model_params/linear/int8dq/16-32-64/bfloat16/cpu/eager",
    ]


def test_sparsity_pairs_as_torchao_does():
    spec = parse_spec(spec_with(
        quantization_config_recipe_names=["baseline", "int8wo", "int8dq", "float8dq-row"],
        sparsity_config_recipe_names=["2:4", "block", None],
    ))
    labels = [c.label for c in spec.cells()]
    assert labels == ["baseline", "baseline+2:4", "baseline+block", "int8wo", "int8dq",
                      "int8dq+2:4", "float8dq-row", "float8dq-row+2:4"]


def test_sparsity_alone_runs_on_the_baseline():
    data = spec_with(sparsity_config_recipe_names=["semi-sparse"])
    del data["quantization_config_recipe_names"]
    assert [c.label for c in parse_spec(data).cells()] == ["baseline", "baseline+semi-sparse"]


@pytest.mark.parametrize(
    ("params", "modes"),
    [
        ({}, ["default"]),  # torchao compiles with "default" when no mode is given
        ({"torch_compile_mode": "max-autotune"}, ["max-autotune"]),
        ({"torch_compile_mode": "false"}, [None]),
        ({"compile": False}, [None]),
        ({"compile": "default"}, ["default"]),
        ({"use_torch_compile": False, "torch_compile_mode": "max-autotune"}, [None]),
        ({"torch_compile_mode": [None, "default", "default"]}, [None, "default"]),
    ],
)
def test_compile_modes(params, modes):
    data = spec_with()
    del data["model_params"]["torch_compile_mode"]
    data["model_params"].update(params)
    assert [c.compile_mode for c in parse_spec(data).cells()] == modes


def test_model_params_list_with_names_and_defaults():
    data = spec_with()
    data["model_params"] = [
        {"name": "a", "matrix_shapes": [{"name": "pow2", "min_power": 4, "max_power": 5}]},
        {"name": "b", "matrix_shapes": [{"name": "llama"}], "high_precision_dtype": "float32",
         "enable_profiler": True},
    ]
    cells = parse_spec(data).cells()
    assert [(c.name, c.shape.mkn) for c in cells[:2]] == [("a", "16-16-16"), ("a", "32-32-32")]
    assert cells[0].device == "cuda" and cells[0].dtype == "bfloat16"  # torchao's defaults
    assert cells[0].model_type == "linear" and not cells[0].enable_profiler
    assert cells[-1].dtype == "float32" and cells[-1].enable_profiler


def test_custom_recipe_from_a_config_class_path():
    data = spec_with(quantization_config_recipe_names=[
        "int8wo",
        {"name": "int8wo-g32", "config": "torchao.quantization.Int8WeightOnlyConfig",
         "kwargs": {"group_size": 32}, "requires": {"devices": ["cuda"], "min_capability": 8.9,
                                                    "packages": ["triton"]}},
    ])
    custom = parse_spec(data).cells()[1]
    assert custom.label == custom.quantization == "int8wo-g32"
    assert custom.custom_recipe.kwargs == {"group_size": 32}
    assert custom.custom_recipe.requires.min_capability == (8, 9)
    assert custom.custom_recipe.requires.devices == {"cuda"}


def test_cell_round_trips_through_plain_json(make_cell):
    spec = parse_spec(spec_with(quantization_config_recipe_names=[
        {"name": "mine", "config": "torchao.quantization.Float8WeightOnlyConfig",
         "kwargs": {"granularity": {"class": "torchao.quantization.PerTensor"}}},
    ]))
    for cell in [*spec.cells(), make_cell(sparsity="2:4", compile_mode="default")]:
        assert QuantCell.from_dict(json.loads(json.dumps(cell.to_dict()))) == cell


def test_validation_names_file_key_path_and_problem():
    with pytest.raises(SpecError) as caught:
        parse_spec(spec_with(quantization_config_recipe_names=["int8wo", "int8w0"]), "my.yml")
    message = str(caught.value)
    assert message.startswith("my.yml: quantization_config_recipe_names[1]: ")
    assert "unknown quantization recipe 'int8w0'" in message
    assert "int4wo-<32|64|128|256>[-hqq]" in message  # the known forms are listed


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (spec_with(quantisation_config_recipe_names=["int8wo"]),
         "quantisation_config_recipe_names: unknown key"),
        (spec_with(quantization_config_recipe_names=["int4wo-100"]),
         "quantization_config_recipe_names[0]: unknown quantization recipe 'int4wo-100'"),
        (spec_with(quantization_config_recipe_names=[]),
         "quantization_config_recipe_names: no recipes"),
        (spec_with(quantization_config_recipe_names="int8wo"),
         "quantization_config_recipe_names: must be a list"),
        (spec_with(quantization_config_recipe_names=["int8wo", "int8wo"]),
         "'int8wo' twice"),
        (spec_with(sparsity_config_recipe_names=["3:4"]),
         "sparsity_config_recipe_names[0]: unknown sparsity recipe '3:4'"),
        (spec_with(benchmark_mode="training"), "benchmark_mode: 'training': only 'inference'"),
        (spec_with(params={"matrix_shapes": [{"name": "custom", "shapes": [[1, 2]]}]}),
         "model_params.matrix_shapes[0].shapes[0]: [1, 2]: must be [m, k, n]"),
        (spec_with(params={"matrix_shapes": [{"name": "custom"}]}),
         "model_params.matrix_shapes[0].shapes: required"),
        (spec_with(params={"matrix_shapes": [{"name": "pow3"}]}),
         "model_params.matrix_shapes[0].name: 'pow3': unknown shape generator"),
        (spec_with(params={"matrix_shapes": [{"name": "pow2", "min_power": 12, "max_power": 10}]}),
         "model_params.matrix_shapes[0]: min_power 12 is above max_power 10"),
        (spec_with(params={"matrix_shapes": [{"name": "sweep", "max_power": "9"}]}),
         "model_params.matrix_shapes[0].max_power: must be an integer"),
        (spec_with(params={"matrix_shapes": [{"name": "llama", "min_power": 3}]}),
         "model_params.matrix_shapes[0].min_power: unknown key"),
        (spec_with(params={"matrix_shapes": []}), "model_params.matrix_shapes: required"),
        (spec_with(params={"high_precision_dtype": "torch.int8"}),
         "model_params.high_precision_dtype: must be one of torch.bfloat16"),
        (spec_with(params={"device": "tpu"}), "model_params.device: 'tpu': must be one of"),
        (spec_with(params={"model_type": "ln_linear_tanh"}),
         "model_params.model_type: unknown model type 'ln_linear_tanh'"),
        (spec_with(params={"torch_compile_mode": "fast"}),
         "model_params.torch_compile_mode: 'fast': must be false or one of"),
        (spec_with(params={"compile": "default"}),
         "model_params: give torch_compile_mode or compile, not both"),
        (spec_with(params={"enable_profiler": "yes"}),
         "model_params.enable_profiler: must be true or false"),
        (spec_with(model_params=[{"name": "a", "matrix_shapes": [{"name": "llama"}]}] * 2),
         "model_params[1].name: 'a' is used by another parameter set"),
        (spec_with(model_params=None), "model_params: required"),
        (spec_with(quantization_config_recipe_names=[{"name": "x", "config": "os.system"}]),
         "quantization_config_recipe_names[0].config: 'os.system' is not an allowed torchao"),
        (spec_with(quantization_config_recipe_names=[
            {"name": "int8wo", "config": "torchao.quantization.Int8WeightOnlyConfig"}]),
         "quantization_config_recipe_names[0].name: 'int8wo' is a built-in recipe"),
        (spec_with(quantization_config_recipe_names=[
            {"name": "x", "config": "torchao.X", "requires": {"min_capability": "high"}}]),
         'quantization_config_recipe_names[0].requires.min_capability: must look like "8.9"'),
        (spec_with(quantization_config_recipe_names=[
            {"name": "x", "config": "torchao.X", "requires": {"devices": ["tpu"]}}]),
         "quantization_config_recipe_names[0].requires.devices: must be a list drawn from"),
    ],
)
def test_validation_errors(data, expected):
    found = problems(data)
    assert any(problem.startswith(expected) or expected in problem for problem in found), found


def test_every_problem_is_reported_at_once():
    found = problems(spec_with(
        quantization_config_recipe_names=["nope"],
        params={"device": "tpu", "model_type": "conv"},
    ))
    assert len(found) == 3
    with pytest.raises(SpecError, match=r"spec.yml: 3 problems:\n  quantization_config"):
        parse_spec(spec_with(quantization_config_recipe_names=["nope"],
                             params={"device": "tpu", "model_type": "conv"}), "spec.yml")


def test_file_problems_name_the_file(tmp_path):
    with pytest.raises(SpecError, match="missing.yml: cannot read"):
        load_spec(tmp_path / "missing.yml")
    broken = tmp_path / "broken.yml"
    broken.write_text("model_params: [unclosed\n")
    with pytest.raises(SpecError, match="broken.yml: not valid YAML"):
        load_spec(broken)
    listed = tmp_path / "list.yml"
    listed.write_text("- int8wo\n")
    with pytest.raises(SpecError, match="list.yml: the spec must be a mapping"):
        load_spec(listed)


def test_yaml_file_round_trip(tmp_path):
    path = tmp_path / "spec.yml"
    path.write_text(textwrap.dedent("""\
        quantization_config_recipe_names: ["float8wo"]
        model_params:
          matrix_shapes: [{name: custom, shapes: [[8, 16, 32]]}]
          device: cpu
    """))
    spec = load_spec(path)
    assert spec.source == str(path)
    assert [c.key for c in spec.cells()] == [
        "model_params/linear/float8wo/8-16-32/bfloat16/cpu/default"
    ]
