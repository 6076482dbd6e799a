"""`/recipes/`: the enabled recipes, what each is, and its latest speedup on each device."""

from __future__ import annotations

import json

from benchsite.catalog.models import Recipe
from benchsite.catalog.results import latest_speedups
from dashboards.render import Page, Table, respond
from dashboards.state import State
from runner.quant import recipes


def recipes_page(request):
    speedups = latest_speedups()
    catalog = list(Recipe.objects.filter(enabled=True))
    named = {recipe.name for recipe in catalog}
    devices = sorted({device for per_device in speedups.values() for device in per_device})
    table = Table("recipes", ["recipe", "kind", "definition", "requirements", *devices], [])
    for recipe in catalog:
        for label in _labels(recipe, speedups, named):
            found = speedups.get(label, {})
            table.rows.append([label, recipe.get_kind_display(), _definition(recipe),
                               recipe.requirements_text,
                               *(round(found[d].geomean, 3) if d in found else None
                                 for d in devices)])
            table.links.append({4 + i: found[d].url for i, d in enumerate(devices) if d in found})
    page = Page(title="Recipes", filters={}, tables=[table],
                context={"state": State(request.GET)})
    return respond(request, "catalog/recipes.html", page)


def _labels(recipe: Recipe, speedups, named: set[str]) -> list[str]:
    """A family's row is one per name of it with results (and no row of its own)."""
    if recipe.kind != Recipe.Kind.FAMILY:
        return [recipe.name]
    found = sorted(label for label in speedups if label not in named
                   and _family(label) == recipe.name)
    return found or [recipe.form]


def _family(label: str) -> str | None:
    try:
        return recipes.family_of(label)
    except recipes.UnknownRecipe:
        return None


def _definition(recipe: Recipe) -> str:
    if recipe.kind == Recipe.Kind.CUSTOM:
        return f"{recipe.config}({json.dumps(recipe.kwargs or {})})"
    if recipe.kind == Recipe.Kind.FAMILY:
        return f"built-in: {recipe.form}"
    return "built-in"
