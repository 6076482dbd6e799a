"""Recipe validation by the runner's registry, problems keyed by the form field at fault.

A custom recipe's config is built once, as a worker would build it, in a child process
(recipe_build) where torch and torchao are installed; without them its class and arguments
are checked for form only and the check says so.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from benchsite.catalog import recipe_build
from benchsite.catalog.models import Recipe
from runner.engine.specs import SpecError
from runner.quant import recipes
from runner.quant.spec import check_custom_recipe

# The spec keys of a custom recipe mapping -> the Recipe field they come from.
SPEC_KEY_FIELDS = {
    "name": "name", "config": "config", "kwargs": "kwargs", "sparsify": "sparsify",
    "requires": "devices", "requires.devices": "devices",
    "requires.min_capability": "min_capability", "requires.packages": "packages",
}
REQUIREMENT_FIELDS = ("devices", "min_capability", "packages")
BUILD_TIMEOUT_S = 120  # importing torch and torchao on a cold disk


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
        check_custom_recipe(item)
    except SpecError as error:
        for problem in error.problems:
            key, _, message = problem.partition(": ")
            key = key.removeprefix("recipe.")
            if key.startswith(("kwargs.", "kwargs[")):  # a value inside: named on the field
                key, message = "kwargs", f"{key.removeprefix('kwargs.')}: {message}"
            check.add(SPEC_KEY_FIELDS.get(key), message)
        return
    _build(item, check)


def _build(item: dict[str, Any], check: RecipeCheck) -> None:
    """Build the config in a child process (recipe_build), as a worker would; the web
    process never imports torch."""
    try:
        done = subprocess.run([sys.executable, "-m", recipe_build.__name__], input=json.dumps(item),
                              capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                              cwd=settings.BASE_DIR)
        outcome = json.loads(done.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        check.note = (f"the config was not built: building it took over {BUILD_TIMEOUT_S} s "
                      "(class and arguments checked for form only)")
        return
    except (IndexError, ValueError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        check.note = f"the config was not built: its build process failed ({tail})"
        return
    if "field" in outcome:
        check.add(outcome["field"], outcome["message"])
    check.checked_with = outcome.get("checked_with", "")
    check.note = outcome.get("note", "")
