"""Recipe validation by the runner's registry, problems keyed by the form field at fault.

A custom recipe's config is built once here, as a worker would build it, when torch and
torchao are installed in the web process; without them its class and arguments are checked
for form only and the check says so.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Any

from benchsite.catalog.models import Recipe
from runner.quant import recipes
from runner.quant.spec import check_custom_recipe
from runner.specs import SpecError

# The spec keys of a custom recipe mapping -> the Recipe field they come from.
SPEC_KEY_FIELDS = {
    "name": "name", "config": "config", "kwargs": "kwargs", "sparsify": "sparsify",
    "requires": "devices", "requires.devices": "devices",
    "requires.min_capability": "min_capability", "requires.packages": "packages",
}
REQUIREMENT_FIELDS = ("devices", "min_capability", "packages")
NOT_BUILT = ("torch and torchao are not installed in the web process: the config class and "
             "its arguments were checked for form only; a worker builds them when it runs")


@dataclass
class RecipeCheck:
    kind: str = ""
    errors: dict[str, list[str]] = field(default_factory=dict)
    checked_with: str = ""  # "torchao 0.18.0" when the config was built
    note: str = ""  # what could not be checked

    def add(self, field_name: str | None, message: str) -> None:
        self.errors.setdefault(field_name or "__all__", []).append(message)


def builtin_forms() -> str:
    return ", ".join(entry.form or key for key, entry in recipes.QUANTIZATION.items())


def is_pattern(name: str) -> bool:
    """A QUANTIZATION key whose names are parameterised (the key itself is no recipe name)."""
    entry = recipes.QUANTIZATION.get(name)
    return entry is not None and entry.pattern is not None


def check_recipe(values: dict[str, Any]) -> RecipeCheck:
    """Validate a recipe's field values (name, config, kwargs, sparsify, devices,
    min_capability, packages) and decide its kind."""
    check = RecipeCheck()
    name = values.get("name") or ""
    if values.get("config"):
        check.kind = Recipe.Kind.CUSTOM
        _check_custom(values, check)
        return check
    if is_pattern(name):
        check.kind = Recipe.Kind.PATTERN
    else:
        try:
            recipes.check_quantization(name)
            check.kind = Recipe.Kind.BUILTIN
        except recipes.UnknownRecipe:
            check.add("name", f"{name!r} is no built-in recipe (built-in: {builtin_forms()}); "
                              "to define a new recipe, give its torchao config class below")
            return check
    for key in REQUIREMENT_FIELDS:
        if values.get(key):
            check.add(key, "built-in recipes have the registry's requirements; leave this "
                           "empty, or give a config class to define a custom recipe")
    if values.get("kwargs"):
        check.add("kwargs", "built-in recipes take no arguments; give a config class to "
                            "define a custom recipe with arguments")
    if values.get("sparsify"):
        check.add("sparsify", "only custom recipes can be marked sparsifying")
    return check


def _check_custom(values: dict[str, Any], check: RecipeCheck) -> None:
    name = values.get("name") or ""
    if is_pattern(name):
        check.add("name", f"{name!r} names the built-in pattern "
                          f"{recipes.QUANTIZATION[name].form}; choose another name")
        return
    item = Recipe(name=name, config=values.get("config") or "",
                  kwargs=values.get("kwargs"), sparsify=bool(values.get("sparsify")),
                  devices=values.get("devices") or [],
                  min_capability=values.get("min_capability") or "",
                  packages=values.get("packages") or []).spec_item()
    try:
        custom = check_custom_recipe(item)
    except SpecError as error:
        for problem in error.problems:
            key, _, message = problem.partition(": ")
            check.add(SPEC_KEY_FIELDS.get(key.removeprefix("recipe.")), message)
        return
    if not all(importlib.util.find_spec(module) for module in ("torch", "torchao")):
        check.note = NOT_BUILT
        return
    try:
        custom.config_class()
    except Exception as error:  # any import or type problem is the class path's
        check.add("config", _describe(error))
        return
    try:
        custom.resolve().build()
    except Exception as error:  # the constructor's own complaint, verbatim
        check.add("kwargs", f"{custom.config} does not accept these arguments: "
                            f"{_describe(error)}")
        return
    import torchao  # optional in the web process: found above

    check.checked_with = f"torchao {torchao.__version__}"


def _describe(error: Exception) -> str:
    if isinstance(error, ModuleNotFoundError):
        return f"cannot import: no module named {error.name!r}"
    if isinstance(error, AttributeError):
        return f"cannot import: {error}"
    return f"{type(error).__name__}: {error}"
