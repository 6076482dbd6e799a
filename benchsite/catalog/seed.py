"""Built-in recipes in the catalog: one row per entry of the runner's registry, so they are
listed and can be disabled. Parameterised entries (int4wo) get a pattern row."""

from __future__ import annotations

from runner.quant import recipes


def seed_builtins(recipe_model) -> list[str]:
    """Add a row for each registry entry that has none; the names added. `recipe_model` is
    the Recipe class (or its historical version in a migration)."""
    added = []
    for name, entry in recipes.QUANTIZATION.items():
        kind = "pattern" if entry.pattern else "builtin"
        _, created = recipe_model.objects.get_or_create(name=name, defaults={"kind": kind})
        if created:
            added.append(name)
    return added
