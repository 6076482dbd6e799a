"""Recipes are validated by the runner's registry, each problem next to its field."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from benchsite.catalog import recipe_build
from benchsite.catalog.models import Recipe
from benchsite.catalog.validation import check_recipe
from tests.catalog.conftest import CUSTOM_INT8

pytestmark = pytest.mark.torch


def custom(**changes):
    return check_recipe({**CUSTOM_INT8, **changes})


@pytest.mark.parametrize(("name", "kind"), [
    ("int8dq", "builtin"), ("int4wo-64-hqq", "builtin"), ("int4wo-128", "builtin"),
    ("int4wo", "pattern"), ("baseline", "builtin"),
])
def test_built_in_names_and_patterns(name, kind):
    check = check_recipe({"name": name})
    assert (check.kind, check.errors) == (kind, {})


def test_a_parameterised_name_outside_the_registry_pattern_names_the_pattern():
    check = check_recipe({"name": "int4wo-48"})
    [message] = check.errors["name"]
    assert "'int4wo-48' is no built-in recipe" in message
    assert "int4wo-<32|64|128|256>[-hqq]" in message and "config class" in message


def test_built_in_recipes_take_no_arguments_or_requirements():
    check = check_recipe({"name": "int8wo", "kwargs": {"x": 1}, "devices": ["cpu"],
                          "min_capability": "8.0", "sparsify": True})
    assert set(check.errors) == {"kwargs", "devices", "min_capability", "sparsify"}


def test_a_custom_recipe_is_built_with_torchao():
    check = custom()
    assert (check.kind, check.errors, check.note) == ("custom", {}, "")
    assert check.checked_with.startswith("torchao 0.18")


def test_nested_objects_and_dtypes_in_arguments_build():
    check = custom(config="torchao.quantization.Int8DynamicActivationInt8WeightConfig",
                   kwargs={"granularity": {"class": "torchao.quantization.PerTensor"}})
    assert check.errors == {}


@pytest.mark.parametrize("config", [
    "torchao.quantization.NoSuchConfig", "torchao.nowhere.Config",
    "torchao.quantization.quantize_", "torch.nn.Linear",
])
def test_bad_classes_are_shown_on_the_config_field(config):
    check = custom(config=config)
    assert list(check.errors) == ["config"]
    assert f"{config!r} is not an allowed torchao config class" in check.errors["config"][0]


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"group_sise": 32}, "unexpected keyword argument 'group_sise'"),
    ({"group_size": 32}, "Use granularity=PerGroup(32) instead"),  # torchao's own check
    ({"granularity": {"class": "torchao.quantization.PerNothing"}},
     "granularity.class: 'torchao.quantization.PerNothing' is not an allowed argument class"),
    ([1, 2], "must be a mapping"),
])
def test_bad_arguments_are_shown_on_the_kwargs_field(kwargs, expected):
    check = custom(kwargs=kwargs)
    assert list(check.errors) == ["kwargs"] and expected in check.errors["kwargs"][0]


@pytest.mark.parametrize(("changes", "field", "expected"), [
    ({"name": "int8wo"}, "name", "is a built-in recipe; choose another name"),
    ({"name": "int4wo"}, "name", "names the built-in pattern"),
    ({"name": "my quant"}, "name", "letters, digits"),
    ({"min_capability": "nine"}, "min_capability", 'must look like "8.9"'),
    ({"devices": ["tpu"]}, "devices", "drawn from cpu, cuda"),
])
def test_custom_names_and_requirements(changes, field, expected):
    check = custom(**changes)
    assert list(check.errors) == [field] and expected in check.errors[field][0]


def test_without_torchao_the_form_is_checked_and_that_is_said(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(recipe_build.importlib.util, "find_spec",
                        lambda name, *a: None if name in ("torch", "torchao") else real(name, *a))
    item = Recipe(**{**CUSTOM_INT8, "kwargs": {"group_sise": 32}}).spec_item()
    assert "not installed beside the web server" in recipe_build.build(item)["note"]


def test_the_web_process_never_imports_torch_to_check_a_recipe():
    """The config is built in a child process; this process (a fresh one, as a web server
    starts) checks a recipe and still has no torch."""
    script = (
        "import sys, django; django.setup()\n"
        "from benchsite.catalog.validation import check_recipe\n"
        f"check = check_recipe({CUSTOM_INT8!r})\n"
        "bad = check_recipe({**" + repr(CUSTOM_INT8) + ", 'kwargs': {'group_sise': 32}})\n"
        "print(check.checked_with, 'torch' in sys.modules, bad.errors['kwargs'][0], sep='|')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "DJANGO_SETTINGS_MODULE": "benchsite.settings"},
                          check=True, timeout=300)
    checked_with, imported, error = done.stdout.strip().splitlines()[-1].split("|")
    assert checked_with.startswith("torchao ") and imported == "False"
    assert "unexpected keyword argument 'group_sise'" in error


def test_the_admin_shows_errors_next_to_the_field_and_a_valid_recipe_saves(
        maintainer_client):
    add = "/admin/catalog/recipe/add/"
    form = {"name": "my_int8", "enabled": "on", "config": "torchao.quantization.NoSuch",
            "kwargs": "{}", "min_capability": "", "packages": "", "description": ""}
    page = maintainer_client.post(add, form)
    assert page.status_code == 200
    errors = page.context["adminform"].form.errors
    assert "is not an allowed torchao config class" in errors["config"][0]
    assert set(errors) == {"config"}
    bad_json = maintainer_client.post(add, {**form, "kwargs": "{group_size: 32"})
    assert "kwargs" in bad_json.context["adminform"].form.errors
    saved = maintainer_client.post(add, {**form, "config": CUSTOM_INT8["config"],
                                         "kwargs": json.dumps(CUSTOM_INT8["kwargs"]),
                                         "devices": ["cpu"],
                                         "packages": "numpy"})
    assert saved.status_code == 302
    recipe = Recipe.objects.get(name="my_int8")
    assert (recipe.kind, recipe.devices, recipe.packages) == ("custom", ["cpu"], ["numpy"])
    assert recipe.checked_with.startswith("torchao") and recipe.updated_by.username == "maintainer"
    builtin = maintainer_client.post(add, {**form, "name": "int4wo-64-hqq", "config": ""})
    assert builtin.status_code == 302
    assert Recipe.objects.get(name="int4wo-64-hqq").requirements_text == \
        "cuda, compute capability >= 8.0"
