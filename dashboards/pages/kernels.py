"""Fused kernels page: memory bandwidth against shape per backend (a chart per kernel and
direction, in a grid, with the device's peak bandwidth where it is known) and each
backend's geomean speedup over eager with its 95% interval, for one commit and device. A
speedup is coloured faster or slower only when its interval excludes 1.00."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Case, When

from benchsite.results.fields import OrjsonField
from benchsite.results.models import Result
from dashboards import charts
from dashboards.choices import summary_choices
from dashboards.families import FamilyPage, register
from dashboards.filters import choice, pairs, prefer
from dashboards.pages.common import (
    Interval,
    geomean,
    geomean_interval,
    interval_of,
    measured_text,
)
from dashboards.pages.family import CommitFilters
from dashboards.peaks import Peak, peak_bandwidth
from dashboards.render import Page, Table
from dashboards.state import State
from runner.contract.names import KERNEL_DIRECTIONS, KERNELS_BENCHMARK, KernelMetric
from runner.contract.status import OK, STATUS_METRIC

METRICS = (*KernelMetric, STATUS_METRIC)
ALL = "all"
Key = tuple[str, str, tuple[int, int], str]  # kernel, direction, (M, N), backend label
CHART_HEIGHT = 330  # px: the charts sit in a grid, several to a row
GEOMEAN = "geomean speedup over eager"


@dataclass
class KernelCell:
    """One kernel, direction, shape and backend at one commit."""

    values: dict[str, float | None] = field(default_factory=dict)
    interval: Interval | None = None  # the speedup's, where the runner paired the timings
    accuracy: str = ""
    status: str = ""  # "skipped" / "failed" from status records

    @property
    def speedup(self) -> float | None:
        return self.values.get(KernelMetric.SPEEDUP)


def backend_label(backend: str, compile_mode: str) -> str:
    """As the runner names backends: "compiled:max-autotune" per compile mode."""
    return f"{backend}:{compile_mode}" if compile_mode not in ("", "none") else backend


def _shape(extra_info: dict) -> tuple[int, int] | None:
    shape = (extra_info.get("benchmark") or {}).get("shape")
    if isinstance(shape, list) and len(shape) == 2 and all(isinstance(d, int) for d in shape):
        return shape[0], shape[1]
    return None


def cells_of(repo: str, sha: str, arch: str, dtype: str) -> dict[Key, KernelCell]:
    """Every cell of one commit, with one query (extra_info, for the speedup's interval, of
    the speedup rows only); a later run of a series wins."""
    speedup_info = Case(When(series__metric=KernelMetric.SPEEDUP, then="extra_info"),
                        output_field=OrjsonField())
    rows = Result.objects.of_commit(repo, sha).in_slice(
        benchmark=KERNELS_BENCHMARK, arch=arch, dtype=dtype, metric=METRICS,
    ).order_by("timestamp", "id").values_list(
        "series__model", "series__mode", "series__backend", "series__compile_mode",
        "series__extra_info", "series__metric", "value", "string_values", speedup_info)
    cells: dict[Key, KernelCell] = {}
    for kernel, direction, backend, mode, extra, metric, value, strings, info in rows:
        shape = _shape(extra)
        if shape is None:
            continue  # not the runner's records: no (M, N) to place them
        key = (kernel, direction, shape, backend_label(backend, mode))
        cell = cells.setdefault(key, KernelCell())
        first = (strings or [""])[0]
        if metric == KernelMetric.ACCURACY:
            cell.accuracy = first
        elif metric == STATUS_METRIC:
            cell.status = first
        else:
            cell.values[metric] = value
            if metric == KernelMetric.SPEEDUP:
                cell.interval = interval_of(info)
    return cells


class KernelFilters(CommitFilters):
    """Repo -> branch -> device -> commit of the fused kernels -> dtype (bfloat16 where that
    commit and device have it)."""

    BENCHMARK = KERNELS_BENCHMARK
    REPO = "pytorch/pytorch"

    dtype = choice("Dtype")
    parents = {**CommitFilters.parents, "dtype": ("sha", "arch")}

    def options_dtype(self, values):
        return pairs(summary_choices("dtype", repo=values["repo"], benchmark=KERNELS_BENCHMARK,
                                     run__head_sha=values["sha"], arch=values["arch"]))

    def default_dtype(self, values, choices):
        return prefer(choices, "bfloat16")


def build(state: State) -> Page:
    form = KernelFilters(state)
    repo, branch, sha, arch, dtype = (form.values[name]
                                      for name in ("repo", "branch", "sha", "arch", "dtype"))
    cells = cells_of(repo, sha, arch, dtype)
    peak = peak_bandwidth(arch)
    table = _cells_table(cells, peak)
    table.paged(state)
    return Page(
        title="Fused kernels",
        filters={"repo": repo, "branch": branch, "sha": sha, "arch": arch, "dtype": dtype,
                 "peak_gbs": peak.gbs if peak else None, **table.paging.as_filters()},
        tables=[_geomeans(cells), table],
        figures=_bandwidth_charts(cells, peak),
        context={"form": form, "missing": not cells, "peak": peak},
    )


def _order(cells: dict[Key, KernelCell]) -> tuple[list[str], list[tuple[int, int]], list[str]]:
    kernels = sorted({key[0] for key in cells})
    shapes = sorted({key[2] for key in cells}, key=lambda s: (s[0] * s[1], s))
    backends = sorted({key[3] for key in cells}, key=lambda b: (b != "eager", b))
    return kernels, shapes, backends


def _bandwidth_charts(cells: dict[Key, KernelCell], peak: Peak | None) -> list[dict]:
    kernels, shapes, backends = _order(cells)
    labels = [f"{m}x{n}" for m, n in shapes]
    figures = []
    for kernel in kernels:
        for direction in KERNEL_DIRECTIONS:
            series = []
            for backend in backends:
                found = [cells.get((kernel, direction, shape, backend)) for shape in shapes]
                if not any(found):
                    continue
                series.append({
                    "name": backend, "x": labels,
                    "y": [cell.values.get(KernelMetric.BANDWIDTH) if cell else None
                          for cell in found],
                    "text": [_state(cell, peak) for cell in found],
                })
            if series:
                figures.append(_bandwidth_chart(f"{kernel} {direction}", series, labels, peak))
    return figures


def _bandwidth_chart(title: str, series: list[dict], labels: list[str],
                     peak: Peak | None) -> dict:
    """One kernel and direction, sized for a grid of them, with the peak as a dashed line."""
    figure = charts.lines(title, series, "GB/s")
    if peak is not None:
        figure["data"].append({
            "type": "scatter", "mode": "lines", "x": labels, "y": [peak.gbs] * len(labels),
            "name": charts.esc(f"peak {peak.gbs:,.0f} GB/s"),
            "line": {"dash": "dash", "color": charts.GREY, "width": 1},
            "hovertemplate": charts.esc(f"{peak.model}: {peak.gbs:,.0f} GB/s")
            + "<extra></extra>"})
    layout = figure["layout"]
    layout["xaxis"] = {"type": "category", "categoryorder": "array", "categoryarray": labels,
                       "title": {"text": "M x N", "standoff": 4}}
    layout["yaxis"]["rangemode"] = "tozero"
    layout["height"] = CHART_HEIGHT
    layout["margin"] = {"l": 60, "r": 40, "t": 40, "b": 30}
    layout["legend"] = {"orientation": "h", "y": -0.3, "font": {"size": 10}}
    return figure


def _state(cell: KernelCell | None, peak: Peak | None) -> str:
    if cell is None:
        return "missing"
    shown = [cell.status or OK]
    bandwidth = cell.values.get(KernelMetric.BANDWIDTH)
    if peak is not None and bandwidth is not None:
        shown.append(f"{bandwidth / peak.gbs:.0%} of peak")
    if cell.speedup is not None:
        shown.append(measured_text(cell.speedup, cell.interval) + " eager")
    if cell.accuracy:
        shown.append(f"accuracy {cell.accuracy}")
    return ", ".join(shown)


def faster_or_slower(speedup: float | None, interval: Interval | None) -> str:
    """CSS class of a speedup over eager: "better"/"worse" only when its 95% interval
    excludes 1.00; "" inside the noise, unstable, or without an interval."""
    if speedup is None or interval is None or not interval.known or interval.unstable:
        return ""
    return "better" if interval.low > 1 else "worse" if interval.high < 1 else ""


def _geomeans(cells: dict[Key, KernelCell]) -> Table:
    """Per backend (eager is the reference) and direction, then over both directions."""
    _, _, backends = _order(cells)
    speedups: dict[tuple[str, str], list[KernelCell]] = defaultdict(list)
    for (_, direction, _, backend), cell in cells.items():
        for group in (direction, ALL):
            speedups[backend, group].append(cell)
    table = Table("geomean", ["backend", "direction", GEOMEAN, "95% CI", "points"], [])
    for backend in backends:
        if backend == "eager":
            continue
        for direction in (*KERNEL_DIRECTIONS, ALL):
            found = speedups.get((backend, direction))
            if found:
                measured = [(c.speedup, c.interval) for c in found if c.speedup is not None]
                value = geomean(speedup for speedup, _ in measured)
                interval = geomean_interval(measured) if measured else None
                table.rows.append([backend, direction, value, _bounds(interval),
                                   f"{len(measured)}/{len(found)}"])
                table.classes.append({GEOMEAN: faster_or_slower(value, interval)})
    return table


def _bounds(interval: Interval | None) -> str | None:
    """"1.562–1.580, 12 pairs, unstable": three decimals, as a geomean over many cells
    narrows its interval below the quantization page's two."""
    if interval is None:
        return None
    shown = [f"{interval.low:.3f}–{interval.high:.3f}" if interval.known else "unknown"]
    if interval.pairs is not None:
        shown.append(f"{interval.pairs} pairs")
    if interval.unstable:
        shown.append("unstable")
    return ", ".join(shown)


def _cells_table(cells: dict[Key, KernelCell], peak: Peak | None) -> Table:
    kernels, shapes, backends = _order(cells)
    table = Table("cells", ["kernel", "direction", "shape (M x N)", "backend", "latency ms",
                            "GB/s", "% of peak", "speedup", "speedup 95% CI", "accuracy",
                            "status"], [])
    for kernel in kernels:
        for direction in KERNEL_DIRECTIONS:
            for shape in shapes:
                for backend in backends:
                    cell = cells.get((kernel, direction, shape, backend))
                    if cell is None:
                        continue
                    values = cell.values
                    bandwidth = values.get(KernelMetric.BANDWIDTH)
                    share = (round(100 * bandwidth / peak.gbs, 1)
                             if peak is not None and bandwidth is not None else None)
                    table.rows.append([
                        kernel, direction, f"{shape[0]}x{shape[1]}", backend,
                        values.get(KernelMetric.LATENCY), bandwidth, share, cell.speedup,
                        _bounds(cell.interval), cell.accuracy or None, cell.status or OK])
                    table.classes.append({"speedup": faster_or_slower(cell.speedup,
                                                                      cell.interval)
                                          or ("noise" if cell.interval
                                              and cell.interval.unstable else "")})
    return table


PAGE = register(FamilyPage(
    family="kernels", benchmark=KERNELS_BENCHMARK, slug="kernels", label="Kernels",
    headline=KernelMetric.SPEEDUP, template="dashboards/kernels.html", build=build,
    filters=KernelFilters,
    columns={KernelMetric.LATENCY: "latency ms", KernelMetric.BANDWIDTH: "GB/s",
             KernelMetric.SPEEDUP: "speedup"}, by_commit=True, order=30))
