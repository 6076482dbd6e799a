"""Instruction counts page: every benchmark's count at a base and a head commit with the
change, coloured beyond the threshold (by default the regression detection's for
instruction counts, 1%), and one benchmark's count over commits."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from benchsite.regressions.models import DetectionSettings
from benchsite.results.models import Result
from dashboards import charts
from dashboards.pages.common import (
    change_class,
    compare_url,
    latest_shas,
    series_options,
    summary_choices,
)
from dashboards.render import Page, Table
from dashboards.state import State
from runner.contract.directions import direction
from runner.contract.names import INSTRUCTIONS_BENCHMARK, InstructionMetric
from runner.contract.status import STATUS_METRIC
from runner.instructions.definitions import benchmark_key

COUNT_METRIC, WALL_METRIC = InstructionMetric.COUNT, InstructionMetric.WALL_TIME

SORTS = {  # URL value -> label
    "change": "largest change",
    "increase": "most instructions added",
    "decrease": "most instructions removed",
    "name": "name",
}
DIRECTION = direction(COUNT_METRIC, INSTRUCTIONS_BENCHMARK).better  # lower is better
COLUMNS = ["benchmark", "runtime", "autograd", "threads", "base", "head", "change %",
           "head wall us", "status"]
CHANGE_COLUMN = COLUMNS.index("change %")


@dataclass
class Row:
    name: str
    runtime: str
    autograd: str
    threads: int
    counts: dict[str, float | None] = field(default_factory=dict)  # sha -> instructions/call
    wall_us: dict[str, float | None] = field(default_factory=dict)
    status: dict[str, str] = field(default_factory=dict)  # sha -> "skipped" / "failed"
    series_id: int | None = None  # of its instruction count

    @property
    def key(self) -> str:
        return benchmark_key(self.name, self.runtime, self.autograd, self.threads)

    def change(self, base: str, head: str) -> float | None:
        before, after = self.counts.get(base), self.counts.get(head)
        return after / before - 1 if before and after is not None else None


def rows_of(repo: str, arch: str, shas: set[str]) -> list[Row]:
    """One row per expanded benchmark measured at any of `shas`, with one query; a commit's
    latest run wins."""
    results = (Result.objects.of_commits(repo, shas).in_slice(
        benchmark=INSTRUCTIONS_BENCHMARK, arch=arch,
        metric=[COUNT_METRIC, WALL_METRIC, STATUS_METRIC])
        .order_by("run__timestamp", "id")
        .values_list("run__head_sha", "series_id", "series__model", "series__extra_info",
                     "series__metric", "value", "string_values"))
    rows: dict[tuple, Row] = {}
    for sha, series_id, model, identity, metric, value, strings in results:
        modes = (identity or {}).get("benchmark", {})
        key = (model, modes.get("runtime", ""), modes.get("autograd", ""),
               modes.get("threads", 1))
        row = rows.setdefault(key, Row(*key))
        if metric == COUNT_METRIC:
            row.counts[sha], row.series_id = value, series_id
            row.status.pop(sha, None)
        elif metric == WALL_METRIC:
            row.wall_us[sha] = value
        else:
            row.status[sha] = (strings or ["?"])[0]
            row.counts.pop(sha, None)
    return list(rows.values())


def _sorted(rows: list[Row], sort: str, base: str, head: str) -> list[Row]:
    def change(row: Row) -> float | None:
        return row.change(base, head)

    if sort == "name":
        return sorted(rows, key=lambda row: row.key)
    known = [row for row in rows if change(row) is not None]
    unknown = sorted((row for row in rows if change(row) is None), key=lambda row: row.key)
    order = {"change": lambda row: -abs(change(row)), "increase": lambda row: -change(row),
             "decrease": lambda row: change(row)}[sort]
    return sorted(known, key=lambda row: (order(row), row.key)) + unknown


def build(state: State) -> Page:
    repos = series_options(("repo",), benchmark=INSTRUCTIONS_BENCHMARK)["repo"]
    repo = state.choice("repo", repos, default="pytorch/pytorch")
    branch = state.text("branch", "main")
    shas = latest_shas(repo, INSTRUCTIONS_BENCHMARK, branch)
    names = [sha for sha, _ in shas] or [""]
    head = state.choice("head", names)
    base = state.choice("base", names, default=names[1] if len(names) > 1 else head)
    archs = summary_choices("arch", repo=repo, benchmark=INSTRUCTIONS_BENCHMARK, run__head_sha=head)
    arch = state.choice("arch", archs or [""])
    default = DetectionSettings.load().tolerance(COUNT_METRIC, INSTRUCTIONS_BENCHMARK)
    threshold = state.number("threshold", 100 * default, 0, 100) / 100
    sort = state.choice("sort", SORTS, default="change")

    rows = _sorted(rows_of(repo, arch, {base, head}), sort, base, head)
    selected = state.choice("benchmark", [row.key for row in rows] or [""])
    table = Table("benchmarks", COLUMNS, [])
    classes: Counter[str] = Counter()
    for row in rows:
        change = row.change(base, head)
        css = change_class(change, threshold, DIRECTION)
        classes[css if change is not None else "missing"] += 1
        table.rows.append([row.name, row.runtime, row.autograd, row.threads,
                           _whole(row.counts.get(base)), _whole(row.counts.get(head)),
                           None if change is None else round(100 * change, 3),
                           row.wall_us.get(head), row.status.get(head, "")])
        table.links.append({0: state.url("dashboards:instructions", benchmark=row.key)})
        table.classes.append({CHANGE_COLUMN: css})
    changes = {"more": classes["worse"], "fewer": classes["better"],
               "missing": classes["missing"]}
    chosen = next((row for row in rows if row.key == selected), None)
    when = dict(shas)
    figures = [_trend(chosen, branch, when, base, head)] if chosen and chosen.series_id else []
    return Page(
        title="Instruction counts",
        filters={"repo": repo, "branch": branch, "arch": arch, "base": base, "head": head,
                 "threshold": threshold * 100, "sort": sort, "benchmark": selected,
                 "changes": changes},
        tables=[table], figures=figures,
        context={"repos": repos, "shas": shas, "archs": archs, "sorts": SORTS,
                 "changes": changes, "rows": len(rows),
                 "compare_url": compare_url(repo, base, head,
                                            benchmark=INSTRUCTIONS_BENCHMARK)},
    )


def _trend(row: Row, branch: str, when: dict, base: str, head: str) -> dict:
    """The row's instructions per call at each commit of the listed ones."""
    points = (Result.objects.filter(series_id=row.series_id, run__head_branch=branch,
                                    timestamp__gte=min(when.values()))
              .order_by("timestamp").values_list("timestamp", "run__head_sha", "value"))
    series = {"name": row.key, "x": [], "y": [], "text": []}
    for timestamp, sha, value in points:
        series["x"].append(timestamp.isoformat())
        series["y"].append(value)
        series["text"].append(sha[:10])
    marks = [{"type": "line", "xref": "x", "yref": "paper", "x0": when[sha].isoformat(),
              "x1": when[sha].isoformat(), "y0": 0, "y1": 1,
              "line": {"color": charts.GREY, "dash": "dot", "width": 1}}
             for sha in dict.fromkeys((base, head)) if sha in when]
    return charts.lines(f"{row.key}: instructions per call", [series], "instructions per call",
                        shapes=marks)


def _whole(count: float | None) -> int | None:
    """Instructions per call as a whole number (the table's default format keeps 4 digits)."""
    return None if count is None else round(count)
