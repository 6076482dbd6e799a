"""Fused kernels page: memory bandwidth against shape per backend (a chart per kernel and
direction) and each backend's geomean speedup over eager, for one commit and device."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from benchsite.results.models import Result
from dashboards import charts
from dashboards.pages.common import geomean, latest_shas, series_options, summary_choices
from dashboards.render import Page, Table
from dashboards.state import State
from runner.contract.names import KERNEL_DIRECTIONS, KERNELS_BENCHMARK, KernelMetric
from runner.contract.status import OK, STATUS_METRIC

METRICS = (*KernelMetric, STATUS_METRIC)
ALL = "all"
Key = tuple[str, str, tuple[int, int], str]  # kernel, direction, (M, N), backend label


@dataclass
class KernelCell:
    """One kernel, direction, shape and backend at one commit."""

    values: dict[str, float | None] = field(default_factory=dict)
    accuracy: str = ""
    status: str = ""  # "skipped" / "failed" from status records


def backend_label(backend: str, compile_mode: str) -> str:
    """As the runner names backends: "compiled:max-autotune" per compile mode."""
    return f"{backend}:{compile_mode}" if compile_mode not in ("", "none") else backend


def _shape(extra_info: dict) -> tuple[int, int] | None:
    shape = (extra_info.get("benchmark") or {}).get("shape")
    if isinstance(shape, list) and len(shape) == 2 and all(isinstance(d, int) for d in shape):
        return shape[0], shape[1]
    return None


def cells_of(repo: str, sha: str, arch: str, dtype: str) -> dict[Key, KernelCell]:
    """Every cell of one commit, with one query; a later run of a series wins."""
    rows = Result.objects.of_commit(repo, sha).in_slice(
        benchmark=KERNELS_BENCHMARK, arch=arch, dtype=dtype, metric=METRICS,
    ).order_by("timestamp", "id").values_list(
        "series__model", "series__mode", "series__backend", "series__compile_mode",
        "series__extra_info", "series__metric", "value", "string_values")
    cells: dict[Key, KernelCell] = {}
    for kernel, direction, backend, mode, extra, metric, value, strings in rows:
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
    return cells


def build(state: State) -> Page:
    repos = series_options(("repo",), benchmark=KERNELS_BENCHMARK)["repo"]
    repo = state.choice("repo", repos, default="pytorch/pytorch")
    branch = state.text("branch", "main")
    shas = latest_shas(repo, KERNELS_BENCHMARK, branch)
    sha = state.choice("sha", [s for s, _ in shas] or [""], default=shas[0][0] if shas else "")
    scope = {"repo": repo, "benchmark": KERNELS_BENCHMARK, "run__head_sha": sha}
    archs = summary_choices("arch", **scope)
    arch = state.choice("arch", archs or [""])
    dtypes = summary_choices("dtype", **scope, arch=arch)
    dtype = state.choice("dtype", dtypes or [""], default="bfloat16")

    cells = cells_of(repo, sha, arch, dtype)
    return Page(
        title="Fused kernels",
        filters={"repo": repo, "branch": branch, "sha": sha, "arch": arch, "dtype": dtype},
        tables=[_geomeans(cells), _cells_table(cells)],
        figures=_bandwidth_charts(cells, arch),
        context={"state": state, "repos": repos, "shas": shas, "archs": archs,
                 "dtypes": dtypes, "missing": not cells},
    )


def _order(cells: dict[Key, KernelCell]) -> tuple[list[str], list[tuple[int, int]], list[str]]:
    kernels = sorted({key[0] for key in cells})
    shapes = sorted({key[2] for key in cells}, key=lambda s: (s[0] * s[1], s))
    backends = sorted({key[3] for key in cells}, key=lambda b: (b != "eager", b))
    return kernels, shapes, backends


def _bandwidth_charts(cells: dict[Key, KernelCell], arch: str) -> list[dict]:
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
                    "text": [_state(cell) for cell in found],
                })
            if series:
                figure = charts.lines(f"{kernel} {direction} ({arch})", series,
                                      "memory bandwidth (GB/s)")
                figure["layout"]["xaxis"] = {
                    "type": "category", "categoryorder": "array", "categoryarray": labels,
                    "title": {"text": "shape (M x N)"}}
                figures.append(figure)
    return figures


def _state(cell: KernelCell | None) -> str:
    if cell is None:
        return "missing"
    speedup = cell.values.get(KernelMetric.SPEEDUP)
    shown = [cell.status or OK]
    if speedup is not None:
        shown.append(f"{speedup:.2f}x eager")
    if cell.accuracy:
        shown.append(f"accuracy {cell.accuracy}")
    return ", ".join(shown)


def _geomeans(cells: dict[Key, KernelCell]) -> Table:
    """Per backend (eager is the reference) and direction, then over both directions."""
    _, _, backends = _order(cells)
    speedups: dict[tuple[str, str], list[float | None]] = defaultdict(list)
    for (_, direction, _, backend), cell in cells.items():
        for group in (direction, ALL):
            speedups[backend, group].append(cell.values.get(KernelMetric.SPEEDUP))
    table = Table("geomean", ["backend", "direction", "geomean speedup over eager", "points"],
                  [])
    for backend in backends:
        if backend == "eager":
            continue
        for direction in (*KERNEL_DIRECTIONS, ALL):
            found = speedups.get((backend, direction))
            if found:
                points = [value for value in found if value is not None]
                table.rows.append([backend, direction, geomean(points),
                                   f"{len(points)}/{len(found)}"])
    return table


def _cells_table(cells: dict[Key, KernelCell]) -> Table:
    kernels, shapes, backends = _order(cells)
    table = Table("cells", ["kernel", "direction", "shape (M x N)", "backend", "latency ms",
                            "GB/s", "speedup", "accuracy", "status"], [])
    for kernel in kernels:
        for direction in KERNEL_DIRECTIONS:
            for shape in shapes:
                for backend in backends:
                    cell = cells.get((kernel, direction, shape, backend))
                    if cell is None:
                        continue
                    values = cell.values
                    table.rows.append([
                        kernel, direction, f"{shape[0]}x{shape[1]}", backend,
                        values.get(KernelMetric.LATENCY), values.get(KernelMetric.BANDWIDTH),
                        values.get(KernelMetric.SPEEDUP), cell.accuracy or None,
                        cell.status or OK])
    return table
