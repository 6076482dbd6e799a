"""Benchmark config validation: recipes resolved from the catalog, the spec planned by the
runner, and the cells each queue's hardware would skip.

The spec a job receives is self-contained: each custom recipe of the catalog that the config
names is inlined as the mapping the runner's spec format takes, so a job never depends on
the catalog as it is later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from django.conf import settings

from benchsite.catalog.hardware import queue_hardware
from benchsite.catalog.models import Recipe
from benchsite.jobs.submit import Plan
from runner import families
from runner.engine.specs import DEFAULT_FAMILY, SpecError, family_name, parse_yaml
from runner.quant import recipes
from runner.quant.cells import QuantCell

RECIPES_KEY = "quantization_config_recipe_names"
EXAMPLES = 3  # cell keys shown per skip reason


@dataclass
class ConfigCheck:
    plan: Plan  # what a job runs: the config's YAML, catalog recipes inlined, and its cells
    skipped: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # queue: reason: keys
    hardware: dict[str, str | None] = field(default_factory=dict)  # queue -> description

    @property
    def spec_yaml(self) -> str:
        return self.plan.spec_yaml

    @property
    def family(self) -> str:
        return self.plan.family.NAME

    @property
    def cell_keys(self) -> list[str]:
        return [planned.key for planned in self.plan.cells]

    def lines(self) -> list[str]:
        """The check as sentences: cells, then what each queue would skip and why."""
        total = len(self.cell_keys)
        lines = [f"{total} cells ({self.family})."]
        if self.family != DEFAULT_FAMILY:
            return [*lines, "Skips are predicted for quantization specs only."]
        for queue, described in self.hardware.items():
            if described is None:
                lines.append(f"Queue {queue}: skips not predicted, its hardware is not "
                             "described (setting BENCH_QUEUE_HARDWARE).")
                continue
            reasons = self.skipped.get(queue, {})
            skipped = sum(len(keys) for keys in reasons.values())
            line = f"Queue {queue} ({described}): {total - skipped} run, {skipped} skipped"
            details = [f"{len(keys)} × {reason} (e.g. {', '.join(keys[:EXAMPLES])})"
                       for reason, keys in reasons.items()]
            lines.append(line + (": " + "; ".join(details) if details else "."))
        return lines


def check_config(text: str, source: str) -> ConfigCheck:
    """Validate a config's YAML against the catalog and the runner; SpecError lists every
    problem (bad YAML, unknown keys, unknown or disabled recipes, bad shapes...)."""
    data = parse_yaml(text, source)
    family = family_name(data)
    problems, inlined = [], False
    if family == DEFAULT_FAMILY and isinstance(data, Mapping):
        problems, inlined = _resolve_recipes(data)
    try:
        family_module, planned = families.plan(data, source)
    except SpecError as error:
        raise SpecError(source, problems + error.problems) from None
    if problems:
        raise SpecError(source, problems)
    if not planned:
        raise SpecError(source, ["the spec expands to no cells"])
    spec_yaml = text
    if inlined:
        spec_yaml = (f"# {source}, with the recipe catalog's custom recipes inlined\n"
                     + yaml.safe_dump(data, sort_keys=False))
    check = ConfigCheck(Plan(spec_yaml, family_module, planned))
    if family == DEFAULT_FAMILY:
        _predict_skips(check, [cell.cell for cell in planned])
    return check


def check_timing(family: str, timing: Any) -> None:
    """ValueError unless `timing` are valid run settings for the family's jobs."""
    if not isinstance(timing, Mapping):
        raise ValueError('must be a JSON object, e.g. {"samples": 10}')
    families.get(family).check_settings(timing)


def _resolve_recipes(data: Any) -> tuple[list[str], bool]:
    """Inline catalog custom recipes named in `data` (in place); problems for disabled ones."""
    names = data.get(RECIPES_KEY)
    if not isinstance(names, list):
        return [], False
    catalog = {recipe.name: recipe for recipe in Recipe.objects.all()}
    problems, inlined = [], False
    for index, item in enumerate(names):
        name = item.get("name") if isinstance(item, Mapping) else item
        if not isinstance(name, str):
            continue
        rows = _catalog_rows(name, catalog)
        disabled = next((row for row in rows if not row.enabled), None)
        if disabled is not None:
            which = f"its pattern {disabled.form} is" if disabled.name != name else "it is"
            problems.append(f"{RECIPES_KEY}[{index}]: recipe {name!r}: {which} disabled in "
                            "the recipe catalog (enable it in the admin, or remove it here)")
        if isinstance(item, str) and rows and rows[0].kind == Recipe.Kind.CUSTOM:
            names[index] = rows[0].spec_item()
            inlined = True
    return problems, inlined


def _catalog_rows(name: str, catalog: dict[str, Recipe]) -> list[Recipe]:
    """The catalog rows that govern `name`: its own, then its built-in pattern's."""
    rows = [catalog[name]] if name in catalog else []
    try:
        pattern = recipes.pattern_of(name)  # the registry key of the pattern `name` matches
    except recipes.UnknownRecipe:
        return rows
    row = catalog.get(pattern)
    if pattern != name and row is not None and row.kind == Recipe.Kind.PATTERN:
        rows.append(row)
    return rows


def _predict_skips(check: ConfigCheck, cells: list[dict[str, Any]]) -> None:
    hardware = queue_hardware()
    check.hardware = {queue: hardware[queue].describe() if queue in hardware else None
                      for queue in settings.BENCH_QUEUES}
    for key, data in zip(check.cell_keys, cells, strict=True):
        cell = QuantCell.from_dict(data)
        requires = cell.recipe().requires
        for queue, machine in hardware.items():
            reason = machine.skip_reason(cell.device, requires)
            if reason:
                check.skipped.setdefault(queue, {}).setdefault(reason, []).append(key)
