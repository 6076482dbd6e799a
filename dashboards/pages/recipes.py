"""Recipes page (`/recipes/`): the enabled recipes, what each is, and its latest speedup on
each device, linked to that run on the quantization page."""

from __future__ import annotations

import json

from django.urls import reverse

from benchsite.catalog.models import Recipe
from benchsite.catalog.results import Speedup, latest_speedups
from dashboards.pages.common import page_url
from dashboards.render import Page, Table
from dashboards.state import State
from runner.quant import recipes


def build(state: State) -> Page:
    speedups = latest_speedups()
    catalog = list(Recipe.objects.filter(enabled=True))
    named = {recipe.name for recipe in catalog}
    devices = sorted({device for per_device in speedups.values() for device in per_device})
    quantization = reverse("dashboards:quantization")
    table = Table("recipes", ["recipe", "kind", "definition", "requirements", *devices], [])
    for recipe in catalog:
        for label in _labels(recipe, speedups, named):
            found = speedups.get(label, {})
            table.rows.append([label, recipe.get_kind_display(), _definition(recipe),
                               recipe.requirements_text,
                               *(round(found[d].geomean, 3) if d in found else None
                                 for d in devices)])
            table.links.append({d: _run_url(quantization, found[d])
                                for d in devices if d in found})
    return Page(title="Recipes", filters={}, tables=[table])


def _run_url(quantization: str, speedup: Speedup) -> str:
    at = speedup.at
    return page_url(quantization, repo=at.repo, branch=at.branch, sha=at.sha, arch=at.arch,
                    compile_mode=speedup.compile_mode)


def _labels(recipe: Recipe, speedups, named: set[str]) -> list[str]:
    """A pattern's row is one per name of it with results (and no row of its own)."""
    if recipe.kind != Recipe.Kind.PATTERN:
        return [recipe.name]
    found = sorted(label for label in speedups if label not in named
                   and _pattern(label) == recipe.name)
    return found or [recipe.form]


def _pattern(label: str) -> str | None:
    try:
        return recipes.pattern_of(label)
    except recipes.UnknownRecipe:
        return None


def _definition(recipe: Recipe) -> str:
    if recipe.kind == Recipe.Kind.CUSTOM:
        return f"{recipe.config}({json.dumps(recipe.kwargs or {})})"
    if recipe.kind == Recipe.Kind.PATTERN:
        return f"built-in: {recipe.form}"
    return "built-in"
