"""Quantization page: speedup over bf16 per recipe and shape for one commit, and base vs new.

A cell the runner marked suspect (its quantized model far slower than bf16, or an SQNR that
makes no sense) keeps its number but is never coloured as a speedup: "suspect" in the
heatmap and the table, with the reason and top kernel, left out of geomeans and changes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

from django.db.models import Case, When
from django.urls import reverse

from benchsite.comparison.directions import HIGHER
from benchsite.results.fields import OrjsonField
from benchsite.results.models import Result
from dashboards import charts
from dashboards.choices import summary_choices
from dashboards.families import FamilyPage, register
from dashboards.filters import choice, commit_choices, pairs, percent, prefer, short_sha
from dashboards.pages.common import (
    Interval,
    Suspect,
    change_class,
    compare_url,
    geomean,
    geomean_interval,
    interval_of,
    measured_text,
    page_url,
    sanity_verdict,
    suspect_of,
    within_noise,
)
from dashboards.pages.family import CommitFilters
from dashboards.render import Page, Table
from dashboards.state import State
from runner.contract.names import (
    QUANT_BASELINE_RECIPE,
    QUANT_BENCHMARK,
    QuantMetric,
    quant_model_name,
    quant_shape,
)
from runner.contract.status import OK, STATUS_METRIC

SPEEDUP = QuantMetric.SPEEDUP
COLUMNS = {  # metric -> column title, in table order
    QuantMetric.BASELINE_TIME: "bf16 ms",
    QuantMetric.QUANTIZED_TIME: "quantized ms",
    SPEEDUP: "speedup",
    QuantMetric.SQNR: "SQNR dB",
    QuantMetric.MEMORY: "memory MB",
}
SHAPE, CHANGE = "shape (M-K-N)", "speedup change %"  # the cells table's linked, styled columns
# The layer a cell times (benchmark.extra_info.model_type: "linear", "ln_linear_relu", ...): a
# recipe and shape is one series per layer, so the layer is part of a row's identity.
LAYER_EXTRA = "benchmark.model_type"  # the explorer's `extra` key for it
LAYER_KEY = "series__extra_info__benchmark__model_type"
Row = tuple[str, str]  # (recipe, layer): a heatmap row, a geomean


@dataclass
class QuantRow:
    """One recipe and shape at one commit: its metrics, or why it did not run."""

    values: dict[str, float | None] = field(default_factory=dict)
    status: str = ""  # "skipped" / "failed" from the runner's status records
    interval: Interval | None = None  # the speedup's, when the runner measured one
    suspect: Suspect | None = None  # the speedup's, when the runner found it suspect

    @property
    def unstable(self) -> bool:
        return self.interval is not None and self.interval.unstable

    @property
    def neutral(self) -> bool:
        """Whether the speedup is not coloured: suspect, or within the noise (its interval
        holds 1.00, or unstable)."""
        return (self.suspect is not None or self.unstable
                or (self.interval is not None and self.interval.contains(1.0)))

    @property
    def ordinary(self) -> bool:
        """A measured speedup to count in geomeans: present and not suspect."""
        return bool(self.values.get(SPEEDUP)) and self.suspect is None


def cells_of(repo: str, sha: str, arch: str,
             compile_mode: str) -> dict[tuple[Row, str], QuantRow]:
    """((recipe, layer), shape) -> QuantRow for one commit, every layer, with one query
    (extra_info, for the speedup's interval, of the speedup rows only)."""
    speedup_info = Case(When(series__metric=SPEEDUP, then="extra_info"),
                        output_field=OrjsonField())
    rows = Result.objects.of_commit(repo, sha).in_slice(
        benchmark=QUANT_BENCHMARK, arch=arch, compile_mode=compile_mode,
        metric=[*COLUMNS, STATUS_METRIC]).values_list(
        "series__dtype", "series__model", LAYER_KEY, "series__metric", "value",
        "string_values", speedup_info)
    cells: dict[tuple[Row, str], QuantRow] = {}
    for recipe, model, kind, metric, value, strings, info in rows:
        row = (recipe, kind if isinstance(kind, str) else "")
        cell = cells.setdefault((row, quant_shape(model, recipe)), QuantRow())
        if metric == STATUS_METRIC:
            cell.status = (strings or [""])[0]
        else:
            cell.values[metric] = value
            if metric == SPEEDUP:
                cell.interval, cell.suspect = interval_of(info), suspect_of(info)
    return cells


def of_layer(cells: dict[tuple[Row, str], QuantRow],
             layer: str) -> dict[tuple[Row, str], QuantRow]:
    """The cells of one layer ("" for all)."""
    return {key: cell for key, cell in cells.items() if not layer or key[0][1] == layer}


def _shape_key(shape: str) -> tuple:
    parts = shape.split("-")
    return tuple(int(p) if p.isdigit() else math.inf for p in parts), shape


class QuantFilters(CommitFilters):
    """Repo -> branch -> device -> commit -> compile mode; the base commit among the
    device's commits."""

    BENCHMARK = QUANT_BENCHMARK
    REPO = "pytorch/ao"

    compile_mode = choice("Compile mode")
    layer = choice("Layer (model type)")
    base = choice("Compare with (base)")
    threshold = percent("Threshold %", 5, 0.5)
    common = choice("Geomeans over", initial="1", choices=[
        ("1", "shapes in both commits"), ("0", "each commit's shapes")])
    parents = {**CommitFilters.parents, "compile_mode": ("sha", "arch"),
               "layer": ("sha", "arch", "compile_mode"), "base": ("repo", "branch", "arch")}
    facets = (*CommitFilters.facets, "layer")  # hidden while the commit times one layer

    def options_compile_mode(self, values):
        return pairs(summary_choices("compile_mode", repo=values["repo"],
                                      benchmark=QUANT_BENCHMARK, run__head_sha=values["sha"],
                                      arch=values["arch"]))

    def default_compile_mode(self, values, choices):
        return prefer(choices, "max-autotune")

    def options_layer(self, values):
        cells = self.cells(values["repo"], values["sha"], values["arch"], values["compile_mode"])
        layers = sorted({layer for (_, layer), _ in cells})
        return [("", "all"), *((layer, layer) for layer in layers if layer)]

    def default_layer(self, values, choices):
        return ""  # every layer: a page never hides a series

    def options_base(self, values):
        return [("", "—"), *commit_choices(self.shas)]

    def default_base(self, values, choices):
        return ""

    def cells(self, repo: str, sha: str, arch: str,
              compile_mode: str) -> dict[tuple[Row, str], QuantRow]:
        """A commit's cells of every layer (`cells_of`), read once a request: the layer
        picker and the page both need them (two queries of 19-21 ms each at 10M results)."""
        key = (repo, sha, arch, compile_mode)
        if key not in self._cells:
            self._cells[key] = cells_of(*key)
        return self._cells[key]

    @cached_property
    def _cells(self) -> dict[tuple[str, str, str, str], dict[tuple[Row, str], QuantRow]]:
        return {}


def build(state: State) -> Page:
    form = QuantFilters(state)
    chosen = form.values
    repo, branch, sha, arch = chosen["repo"], chosen["branch"], chosen["sha"], chosen["arch"]
    compile_mode, base, layer = chosen["compile_mode"], chosen["base"], chosen["layer"]
    threshold = chosen["threshold"] / 100
    common_only = chosen["common"] == "1"

    new = of_layer(form.cells(repo, sha, arch, compile_mode), layer)
    old = of_layer(form.cells(repo, base, arch, compile_mode), layer) if base else {}
    rows = sorted({row for row, _ in new} | {row for row, _ in old})
    shapes = sorted({shape for _, shape in new} | {shape for _, shape in old}, key=_shape_key)
    layered = len({kind for _, kind in rows}) > 1  # then the layer is a column and a label

    cells = _cells_table(state, rows, shapes, new, old, base, threshold, layered)
    cells.paged(state)  # the heatmap shows them all; the table a page at a time
    labels = [_row_label(row, layered) for row in rows]
    figures = [_heatmap(f"Speedup over bf16 at {short_sha(sha)} ({arch}, {compile_mode})",
                        rows, labels, shapes, new)]
    if base:
        figures.append(_change_heatmap(rows, labels, shapes, new, old, base, sha))
    page = Page(
        title="Quantization",
        filters={"repo": repo, "branch": branch, "sha": sha, "arch": arch,
                 "compile_mode": compile_mode, "layer": layer, "base": base,
                 "threshold": threshold, "common": common_only},
        tables=[_geomeans(rows, new, old, base, threshold, common_only, layered), cells],
        figures=figures,
        context={"form": form, "missing": not new, "sanity": sanity_lines(new, shapes),
                 "compare_url": compare_url(repo, base, sha, benchmark=QUANT_BENCHMARK)},
    )
    return page


def _row_label(row: Row, layered: bool) -> str:
    recipe, layer = row
    return f"{recipe} ({layer or 'no layer'})" if layered else recipe


def _speedup(cell: QuantRow | None) -> float | None:
    return cell.values.get(SPEEDUP) if cell else None


def sanity_lines(cells: dict[tuple[Row, str], QuantRow], shapes: list[str]) -> list[dict]:
    """The baseline recipe's cells (bf16 timed against itself), as {"suspect", "text"} lines:
    one for those whose interval holds 1.00, one per other cell."""
    layers = sorted({layer for (recipe, layer), _ in cells if recipe == QUANT_BASELINE_RECIPE})
    measured = [(shape if len(layers) < 2 else f"{shape} ({layer})", cell)
                for shape in shapes for layer in layers
                if (cell := cells.get(((QUANT_BASELINE_RECIPE, layer), shape)))
                and _speedup(cell) is not None]
    title = "Sanity check (baseline vs baseline)"
    lines, passed = [], []
    for shape, cell in measured:
        if cell.interval is not None and cell.interval.contains(1.0):
            passed.append(cell)
            continue
        suspect, verdict = sanity_verdict(_speedup(cell), cell.interval)
        reading = measured_text(_speedup(cell), cell.interval)
        lines.append({"suspect": suspect, "text": f"{title}, {shape}: {reading}: {verdict}"})
    if len(passed) == 1:
        [cell] = passed
        lines.insert(0, {"suspect": False,
                         "text": f"{title}: {measured_text(_speedup(cell), cell.interval)}: ok"})
    elif passed:
        low, high = min(map(_speedup, passed)), max(map(_speedup, passed))
        lines.insert(0, {"suspect": False, "text": (
            f"{title}: {low:.2f}x to {high:.2f}x on {len(passed)} of {len(measured)} shapes, "
            "each 95% CI holding 1.00: ok")})
    return lines


def _label(cell: QuantRow | None) -> str:
    """The cell's text in the heatmap: "≈" marks a speedup whose interval holds 1.00, "?" an
    unstable one; a suspect one says so."""
    if cell is None:
        return "—"
    if cell.status:
        return cell.status
    value = _speedup(cell)
    if value is None:
        return "—"
    if cell.suspect:
        return f"suspect {value:.3g}x"
    near = "≈" if cell.interval is not None and cell.interval.contains(1.0) else ""
    return f"{near}{value:.2f}x{'?' if cell.unstable else ''}"


def _hover(cell: QuantRow | None) -> str:
    value = _speedup(cell)
    if value is None:
        return _label(cell)
    text = measured_text(value, cell.interval)
    return f"{text}: {cell.suspect.describe()}" if cell.suspect else text


def _heatmap(title, keys, labels, shapes, cells) -> dict:
    """Speedups coloured around 1.00; a cell within the noise (`QuantRow.neutral`) gets the
    neutral colour whatever its value."""
    rows = [[cells.get((r, s)) for s in shapes] for r in keys]
    z = [[1.0 if cell and cell.neutral and _speedup(cell) is not None else _speedup(cell)
          for cell in row] for row in rows]
    text = [[_label(cell) for cell in row] for row in rows]
    hover = [[_hover(cell) for cell in row] for row in rows]
    return charts.heatmap(title, shapes, labels, z, text, "speedup (x)", midpoint=1.0,
                          hover=hover)


def _change(new: float | None, old: float | None) -> float | None:
    if new is None or old is None or old == 0 or not math.isfinite(new * old):
        return None
    return new / old - 1


def _noisy(cell: QuantRow | None, before: QuantRow | None) -> bool:
    """Whether the change between two cells' speedups is not to be coloured: inside their
    noise, or either suspect."""
    if any(c is not None and c.suspect for c in (cell, before)):
        return True
    return within_noise(cell and cell.interval, before and before.interval)


def _change_heatmap(recipes, labels, shapes, new, old, base, sha) -> dict:
    """Changes coloured around 0; one within the noise is neutral, its text marked "≈"."""
    z, text = [], []
    for recipe in recipes:
        pairs = [(new.get((recipe, s)), old.get((recipe, s))) for s in shapes]
        changes = [(_change(_speedup(cell), _speedup(before)), _noisy(cell, before))
                   for cell, before in pairs]
        z.append([None if c is None else 0.0 if noisy else round(100 * c, 2)
                  for c, noisy in changes])
        text.append(["—" if c is None else f"{'≈' if noisy else ''}{100 * c:+.1f}%"
                     for c, noisy in changes])
    return charts.heatmap(f"Speedup change, {short_sha(base)} → {short_sha(sha)}", shapes,
                          labels, z, text, "change (%)", midpoint=0.0)


def _geomean_interval(cells: dict, recipe: Row, shapes: set[str]) -> Interval | None:
    return geomean_interval((_speedup(cells[(recipe, s)]), cells[(recipe, s)].interval)
                            for s in shapes)


def _geomeans(recipes, new, old, base, threshold, common_only, layered) -> Table:
    columns = ["recipe", *(["layer"] if layered else []), "geomean speedup", "points"]
    if base:
        columns += ["base geomean", "base points", "change"]
    table = Table("geomean", columns, [])
    for recipe in recipes:
        shapes_new = {s for (r, s), c in new.items() if r == recipe and c.ordinary}
        shapes_old = {s for (r, s), c in old.items() if r == recipe and c.ordinary}
        if base and common_only:
            shapes_new = shapes_old = shapes_new & shapes_old
        total = sum(1 for r, _ in new if r == recipe)
        g_new = geomean(_speedup(new[(recipe, s)]) for s in shapes_new)
        row = [recipe[0], *([recipe[1]] if layered else []), g_new,
               f"{len(shapes_new)}/{total}"]
        classes = {}
        if base:
            g_old = geomean(_speedup(old[(recipe, s)]) for s in shapes_old)
            change = _change(g_new, g_old)
            row += [g_old, f"{len(shapes_old)}/{sum(1 for r, _ in old if r == recipe)}",
                    None if change is None else round(100 * change, 2)]
            noisy = within_noise(_geomean_interval(new, recipe, shapes_new),
                                 _geomean_interval(old, recipe, shapes_old))
            classes["change"] = change_class(change, threshold, HIGHER, noisy=noisy)
        table.rows.append(row)
        table.classes.append(classes)
    return table


def _metric_columns(cell: QuantRow | None) -> list:
    """The cell's metrics in COLUMNS order, its speedup's interval ("95% CI") after it."""
    values = cell.values if cell else {}
    row = []
    for metric in COLUMNS:
        row.append(values.get(metric))
        if metric == SPEEDUP:
            row.append(cell.interval.bounds() if cell and cell.interval else None)
    return row


def _status(cell: QuantRow | None) -> str:
    if cell is None:
        return "missing"
    if cell.suspect and not cell.status:
        return cell.suspect.describe()
    return cell.status or ("unstable" if cell.unstable else OK)


def _cells_table(state, recipes, shapes, new, old, base, threshold, layered) -> Table:
    titles = list(COLUMNS.values())
    titles.insert(list(COLUMNS).index(SPEEDUP) + 1, "95% CI")
    columns = ["recipe", *(["layer"] if layered else []), SHAPE, *titles, "status"]
    if base:
        columns += ["base speedup", CHANGE]
    table = Table("cells", columns, [])
    explorer = reverse("dashboards:explorer")
    for recipe in recipes:
        for shape in shapes:
            cell, before = new.get((recipe, shape)), old.get((recipe, shape))
            if cell is None and before is None:
                continue
            row = [recipe[0], *([recipe[1]] if layered else []), shape,
                   *_metric_columns(cell), _status(cell)]
            classes = {"speedup": "noise", "status": "suspect"} if cell and cell.suspect else {}
            if base:
                change = _change(_speedup(cell), _speedup(before))
                row += [_speedup(before), None if change is None else round(100 * change, 2)]
                classes[CHANGE] = change_class(change, threshold, HIGHER,
                                               noisy=_noisy(cell, before))
            table.rows.append(row)
            table.classes.append(classes)
            table.links.append({SHAPE: page_url(
                explorer, repo=state.values["repo"], benchmark=QUANT_BENCHMARK,
                model=quant_model_name(recipe[0], shape), arch=state.values["arch"],
                compile_mode=state.values["compile_mode"], range="90d",
                extra=f"{LAYER_EXTRA}={recipe[1]}" if recipe[1] else "")})
    return table


PAGE = register(FamilyPage(
    family="quantization", benchmark=QUANT_BENCHMARK, slug="quantization",
    label="Quantization", headline=SPEEDUP, template="dashboards/quantization.html",
    build=build, filters=QuantFilters, columns=COLUMNS, by_commit=True,
    labels={"dtype": "recipe"}, order=10))
