"""A spec is data in a box: its paths stay under the folder of the run, its recipes name only
allowed torchao classes, and what it costs is bounded before anything is planned."""

from __future__ import annotations

import os
import sys
import time

import pytest

from runner import families
from runner.engine.folders import inside, path_problem
from runner.engine.specs import (
    MAX_CELLS,
    MAX_SPEC_BYTES,
    SHOWN_CHARS,
    SpecError,
    parse_yaml,
    read_spec,
)
from runner.quant.recipes import CustomRecipe
from runner.quant.spec import check_custom_recipe, parse_spec

SPEC = {
    "quantization_config_recipe_names": ["int8wo"],
    "model_params": {"matrix_shapes": [{"name": "custom", "shapes": [[16, 64, 32]]}],
                     "device": "cpu", "torch_compile_mode": False},
}
# The probe's alias bomb: 9 levels of 9 aliases each, 748 bytes that stand for 9^7 values.
ALIAS_BOMB = "\n".join([
    "quantization_config_recipe_names:",
    "  - name: bomb",
    "    config: torchao.quantization.Int8WeightOnlyConfig",
    "    kwargs:",
    "      a0: &a0 [x, x, x, x, x, x, x, x, x]",
    *(f"      a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 8)),
    "model_params: {matrix_shapes: [{name: custom, shapes: [[1, 1, 1]]}], device: cpu}",
])
# What a recipe must never reach: importers, the shell, eval, and torchao callables that are
# no config (the probe's parq import_module, quantize_).
CALLABLES = ["importlib.import_module", "os.system", "builtins.eval",
             "torchao.prototype.parq.utils.import_module", "torchao.quantization.quantize_"]


@pytest.mark.parametrize("value", [
    "/tmp/x", "//server/share", "../x", "results/../../x", "a/../..", "~/x", "C:\\x",
    "..\\..\\x", "a\x00b", "", "  ", None, 3,
])
def test_paths_a_spec_names_are_relative_names_without_parent_steps(value):
    assert path_problem(value)


@pytest.mark.parametrize("value", ["results", "benchmarks/microbenchmarks/results", ".", "a.b"])
def test_relative_paths_are_kept(value):
    assert path_problem(value) is None


@pytest.mark.parametrize("output_dir", ["/tmp/elsewhere", "../../../../../tmp/elsewhere"])
@pytest.mark.parametrize("family", ["quantization", "compilers"])
def test_a_spec_with_an_outside_output_dir_is_refused_naming_it(family, output_dir):
    data = ({**SPEC, "output_dir": output_dir} if family == "quantization"
            else {"family": "compilers", "models": ["mlp"], "output_dir": output_dir})
    with pytest.raises(SpecError, match="output_dir: .*(relative|'..')"):
        families.plan(data, "spec.yml")


def test_a_model_name_cannot_climb_out_of_the_profiles_folder():
    data = {"family": "compilers", "models": [{"factory": "m:f", "name": "../../x"}]}
    with pytest.raises(SpecError, match=r"models\[0\].name: letters, digits"):
        families.plan(data, "spec.yml")


def test_inside_stays_under_the_folder_even_through_a_link(tmp_path):
    assert inside(tmp_path, "a/b") == tmp_path.resolve() / "a" / "b"
    assert (tmp_path / "a" / "b").is_dir()
    os.symlink("/tmp", tmp_path / "link")
    with pytest.raises(ValueError, match="outside"):
        inside(tmp_path, "link/x")
    with pytest.raises(ValueError, match="relative"):
        inside(tmp_path, "/tmp/x")


def test_an_alias_bomb_is_refused_at_once():
    assert len(ALIAS_BOMB) < 800
    started = time.perf_counter()
    with pytest.raises(SpecError, match="more than 100,000 values once YAML aliases"):
        parse_yaml(ALIAS_BOMB, "bomb.yml")
    assert time.perf_counter() - started < 5


def test_a_value_that_contains_itself_and_deep_nesting_are_refused():
    with pytest.raises(SpecError, match="nested too deeply"):  # it is infinitely deep
        parse_yaml("a: &a [1, *a]\n", "loop.yml")
    with pytest.raises(SpecError, match="nested too deeply"):
        parse_yaml("a: " + "[" * 40 + "]" * 40 + "\n", "deep.yml")
    started = time.perf_counter()
    with pytest.raises(SpecError, match="nested too deeply|exceeded maximum nesting depth"):
        parse_yaml("a: " + "[" * 500_000 + "]" * 500_000 + "\n", "deeper.yml")
    assert time.perf_counter() - started < 5


def test_a_large_spec_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    text = "a: " + "x" * MAX_SPEC_BYTES + "\n"
    monkeypatch.setattr("yaml.load", lambda *_args, **_kwargs: pytest.fail("parsed"))
    with pytest.raises(SpecError, match="a spec may have at most 1,048,576 bytes"):
        parse_yaml(text, "big.yml")
    path = tmp_path / "big.yml"
    path.write_text(text)
    with pytest.raises(SpecError, match="at most 1,048,576 bytes"):
        read_spec(path)


def test_errors_never_echo_a_large_input():
    data = {**SPEC, "quantization_config_recipe_names": ["x" * 100_000] * 500}
    with pytest.raises(SpecError) as error:
        parse_spec(data, "echo.yml")
    assert len(str(error.value)) < 60 * (SHOWN_CHARS + 100)
    assert "and 450 more problems" in str(error.value)


def test_a_spec_that_expands_to_too_many_cells_is_refused_before_expanding():
    shapes = [[m, 64, 64] for m in range(1, 5_001)]
    data = {**SPEC, "quantization_config_recipe_names": ["int8wo", "int8dq", "float8wo"],
            "model_params": {**SPEC["model_params"],
                             "matrix_shapes": [{"name": "custom", "shapes": shapes}]}}
    with pytest.raises(SpecError, match=f"expands to 15,000 cells: a spec may have at most "
                                        f"{MAX_CELLS:,}"):
        families.plan(data, "wide.yml")


def nested(callable_path: str, depth: int):
    """kwargs whose value at `depth` builds `callable_path`, inside mappings, lists and the
    kwargs of allowed objects."""
    value = {"class": callable_path, "kwargs": {"name": "this"}}
    for level in range(depth):
        wrap = level % 3
        if wrap == 0:
            value = [value]
        elif wrap == 1:
            value = {"inner": value}
        else:
            value = {"class": "torchao.quantization.PerGroup", "kwargs": {"group_size": value}}
    return {"group_size": value}


@pytest.mark.parametrize("depth", range(5))
@pytest.mark.parametrize("callable_path", CALLABLES)
def test_recipes_name_allowed_configs_never_callables_at_any_depth(callable_path, depth):
    sys.modules.pop("this", None)
    item = {"name": "importer", "config": "torchao.quantization.Int8WeightOnlyConfig",
            "kwargs": nested(callable_path, depth)}
    with pytest.raises(SpecError, match=f"'{callable_path}' is not an allowed argument class"):
        check_custom_recipe(item)
    with pytest.raises(SpecError, match="not an allowed argument class"):
        parse_spec({**SPEC, "quantization_config_recipe_names": [item]})
    assert "this" not in sys.modules


@pytest.mark.parametrize("callable_path", CALLABLES)
def test_a_recipe_config_must_be_an_allowed_config_class(callable_path):
    with pytest.raises(SpecError, match=f"'{callable_path}' is not an allowed torchao config"):
        check_custom_recipe({"name": "x", "config": callable_path})


@pytest.mark.parametrize("depth", [0, 3])
@pytest.mark.parametrize("callable_path", CALLABLES)
def test_the_worker_refuses_a_stored_cell_that_names_a_callable(callable_path, depth):
    """A cell planned before these checks (or edited in the database) is refused again when a
    worker builds its config, before anything is imported."""
    sys.modules.pop("this", None)
    config = "torchao.quantization.Int8WeightOnlyConfig"
    kwargs = nested(callable_path, depth)
    for recipe in (CustomRecipe("x", callable_path), CustomRecipe("x", config, kwargs)):
        with pytest.raises(ValueError, match="is not an allowed"):
            recipe.resolve().build()
    assert "this" not in sys.modules


@pytest.mark.parametrize(("value", "expected"), [
    ("torch.nn", "is no torch dtype"),
    ({"class": "torchao.quantization.PerRow", "extra": 1}, "unknown key of an object"),
    ({"class": "torchao.quantization.PerRow", "kwargs": [1]}, "kwargs: must be a mapping"),
    ({"class": ["torchao.quantization.PerRow"]}, "is not an allowed argument class"),
])
def test_argument_values_are_plain_data(value, expected):
    with pytest.raises(SpecError, match=expected):
        check_custom_recipe({"name": "x", "config": "torchao.quantization.Int8WeightOnlyConfig",
                             "kwargs": {"granularity": value}})
