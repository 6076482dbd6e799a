"""Quantization page: speedup over bf16 per recipe and shape for one commit, and base vs new."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from django.urls import reverse

from benchsite.results.models import Result
from dashboards import charts
from dashboards.pages.common import (
    change_class,
    compare_url,
    geomean,
    latest_shas,
    page_url,
    series_options,
    summary_choices,
)
from dashboards.render import Page, Table
from dashboards.state import State
from runner.contract.directions import HIGHER
from runner.contract.names import QUANT_BENCHMARK, QuantMetric, quant_model_name, quant_shape
from runner.contract.status import OK, STATUS_METRIC

SPEEDUP = QuantMetric.SPEEDUP
COLUMNS = {  # metric -> column title, in table order
    QuantMetric.BASELINE_TIME: "bf16 ms",
    QuantMetric.QUANTIZED_TIME: "quantized ms",
    SPEEDUP: "speedup",
    QuantMetric.SQNR: "SQNR dB",
    QuantMetric.MEMORY: "memory MB",
}


@dataclass
class QuantCell:
    """One recipe and shape at one commit: its metrics, or why it did not run."""

    values: dict[str, float | None] = field(default_factory=dict)
    status: str = ""  # "skipped" / "failed" from the runner's status records


def cells_of(repo: str, sha: str, arch: str,
             compile_mode: str) -> dict[tuple[str, str], QuantCell]:
    """(recipe, shape) -> QuantCell for one commit, with one query."""
    rows = Result.objects.of_commit(repo, sha).in_slice(
        benchmark=QUANT_BENCHMARK, arch=arch, compile_mode=compile_mode,
        metric=[*COLUMNS, STATUS_METRIC],
    ).values_list("series__dtype", "series__model", "series__metric", "value",
                  "string_values")
    cells: dict[tuple[str, str], QuantCell] = {}
    for recipe, model, metric, value, strings in rows:
        cell = cells.setdefault((recipe, quant_shape(model, recipe)), QuantCell())
        if metric == STATUS_METRIC:
            cell.status = (strings or [""])[0]
        else:
            cell.values[metric] = value
    return cells


def _shape_key(shape: str) -> tuple:
    parts = shape.split("-")
    return tuple(int(p) if p.isdigit() else math.inf for p in parts), shape


def build(state: State) -> Page:
    repos = series_options(("repo",), benchmark=QUANT_BENCHMARK)["repo"]
    repo = state.choice("repo", repos, default="pytorch/ao")
    branch = state.text("branch", "main")
    shas = latest_shas(repo, QUANT_BENCHMARK, branch)
    sha = state.choice("sha", [s for s, _ in shas] or [""], default=shas[0][0] if shas else "")
    archs = summary_choices("arch", repo=repo, benchmark=QUANT_BENCHMARK, run__head_sha=sha)
    arch = state.choice("arch", archs or [""])
    modes = summary_choices("compile_mode", repo=repo, benchmark=QUANT_BENCHMARK,
                            run__head_sha=sha, arch=arch)
    compile_mode = state.choice("compile_mode", modes or [""], default="max-autotune")
    base = state.choice("base", ["", *(s for s, _ in shas)], default="")
    threshold = state.number("threshold", 5, 0, 100) / 100
    common_only = state.flag("common", True)

    new = cells_of(repo, sha, arch, compile_mode)
    old = cells_of(repo, base, arch, compile_mode) if base else {}
    recipes = sorted({recipe for recipe, _ in new} | {recipe for recipe, _ in old})
    shapes = sorted({shape for _, shape in new} | {shape for _, shape in old}, key=_shape_key)

    figures = [_heatmap(f"Speedup over bf16 at {sha[:10]} ({arch}, {compile_mode})",
                        recipes, shapes, new)]
    if base:
        figures.append(_change_heatmap(recipes, shapes, new, old, base, sha))
    page = Page(
        title="Quantization",
        filters={"repo": repo, "branch": branch, "sha": sha, "arch": arch,
                 "compile_mode": compile_mode, "base": base, "threshold": threshold,
                 "common": common_only},
        tables=[_geomeans(recipes, new, old, base, threshold, common_only),
                _cells_table(state, recipes, shapes, new, old, base, threshold)],
        figures=figures,
        context={"state": state, "shas": shas, "archs": archs, "modes": modes,
                 "repos": repos, "missing": not new,
                 "compare_url": compare_url(repo, base, sha, benchmark=QUANT_BENCHMARK)},
    )
    return page


def _speedup(cell: QuantCell | None) -> float | None:
    return cell.values.get(SPEEDUP) if cell else None


def _label(cell: QuantCell | None) -> str:
    if cell is None:
        return "—"
    if cell.status:
        return cell.status
    value = _speedup(cell)
    return "—" if value is None else f"{value:.2f}x"


def _heatmap(title, recipes, shapes, cells) -> dict:
    z = [[_speedup(cells.get((r, s))) for s in shapes] for r in recipes]
    text = [[_label(cells.get((r, s))) for s in shapes] for r in recipes]
    return charts.heatmap(title, shapes, recipes, z, text, "speedup (x)", midpoint=1.0)


def _change(new: float | None, old: float | None) -> float | None:
    if new is None or old is None or old == 0 or not math.isfinite(new * old):
        return None
    return new / old - 1


def _change_heatmap(recipes, shapes, new, old, base, sha) -> dict:
    z, text = [], []
    for recipe in recipes:
        changes = [_change(_speedup(new.get((recipe, s))), _speedup(old.get((recipe, s))))
                   for s in shapes]
        z.append([None if c is None else round(100 * c, 2) for c in changes])
        text.append(["—" if c is None else f"{100 * c:+.1f}%" for c in changes])
    return charts.heatmap(f"Speedup change, {base[:10]} → {sha[:10]}", shapes, recipes, z,
                          text, "change (%)", midpoint=0.0)


def _geomeans(recipes, new, old, base, threshold, common_only) -> Table:
    columns = ["recipe", "geomean speedup", "points"]
    if base:
        columns += ["base geomean", "base points", "change"]
    table = Table("geomean", columns, [])
    for recipe in recipes:
        shapes_new = {s for (r, s), c in new.items() if r == recipe and _speedup(c)}
        shapes_old = {s for (r, s), c in old.items() if r == recipe and _speedup(c)}
        if base and common_only:
            shapes_new = shapes_old = shapes_new & shapes_old
        total = sum(1 for r, _ in new if r == recipe)
        g_new = geomean(_speedup(new[(recipe, s)]) for s in shapes_new)
        row = [recipe, g_new, f"{len(shapes_new)}/{total}"]
        classes = {}
        if base:
            g_old = geomean(_speedup(old[(recipe, s)]) for s in shapes_old)
            change = _change(g_new, g_old)
            row += [g_old, f"{len(shapes_old)}/{sum(1 for r, _ in old if r == recipe)}",
                    None if change is None else round(100 * change, 2)]
            classes[5] = change_class(change, threshold, HIGHER)
        table.rows.append(row)
        table.classes.append(classes)
    return table


def _cells_table(state, recipes, shapes, new, old, base, threshold) -> Table:
    columns = ["recipe", "shape (M-K-N)", *COLUMNS.values(), "status"]
    if base:
        columns += ["base speedup", "speedup change %"]
    table = Table("cells", columns, [])
    explorer = reverse("dashboards:explorer")
    for recipe in recipes:
        for shape in shapes:
            cell, before = new.get((recipe, shape)), old.get((recipe, shape))
            if cell is None and before is None:
                continue
            values = cell.values if cell else {}
            row = [recipe, shape, *(values.get(metric) for metric in COLUMNS),
                   (cell.status or OK) if cell else "missing"]
            classes = {}
            if base:
                change = _change(_speedup(cell), _speedup(before))
                row += [_speedup(before), None if change is None else round(100 * change, 2)]
                classes[len(row) - 1] = change_class(change, threshold, HIGHER)
            table.rows.append(row)
            table.classes.append(classes)
            table.links.append({1: page_url(
                explorer, repo=state.values["repo"], benchmark=QUANT_BENCHMARK,
                model=quant_model_name(recipe, shape), arch=state.values["arch"],
                compile_mode=state.values["compile_mode"], range="90d")})
    return table

