"""Instruction counts page: every benchmark's count at a base and a head commit with the
change, coloured beyond the threshold (by default the regression detection's for
instruction counts, 1%), and one benchmark's count over commits."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from benchsite.comparison.directions import direction_of
from benchsite.regressions.models import DetectionSettings
from benchsite.results.models import Result
from dashboards import charts
from dashboards.families import FamilyPage, register
from dashboards.filters import choice, commit_choices, pairs, percent, prefer
from dashboards.pages.common import change_class, compare_url
from dashboards.pages.family import FamilyFilters
from dashboards.render import Page, Table
from dashboards.state import State
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
COLUMNS = ["benchmark", "runtime", "autograd", "threads", "base", "head", "change %",
           "head wall us", "status"]
RECENT = 10  # commits searched for the default pair: the largest change among them
WHEN = "%Y-%m-%d %H:%M"  # a commit's time in the head and base choices


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


def largest_change(repo: str, arch: str,
                   shas: list[str]) -> tuple[str, str, float, str] | None:
    """(base, head, change, benchmark key) of the consecutive commits among `shas` (newest
    first) where one benchmark's count changed most; None when no count changed."""
    rows = rows_of(repo, arch, set(shas))
    best = None
    for head, base in zip(shas, shas[1:], strict=False):
        for row in rows:
            change = row.change(base, head)
            if change and (best is None or abs(change) > abs(best[2])):
                best = (base, head, change, row.key)
    return best


class InstructionFilters(FamilyFilters):
    """Repo -> branch -> device -> head and base (default: the largest change among the
    recent commits) -> the benchmark charted (default: the one that changed most)."""

    BENCHMARK = INSTRUCTIONS_BENCHMARK
    REPO = "pytorch/pytorch"

    head = choice("Head")
    base = choice("Base")
    threshold = percent("Threshold %", 1, 0.1)
    sort = choice("Sort by", choices=list(SORTS.items()), initial="change")
    benchmark = choice("Chart of")
    parents = {**FamilyFilters.parents, "head": ("repo", "branch", "arch"),
               "base": ("repo", "branch", "arch"), "benchmark": ("base", "head")}

    def options_head(self, values):
        choices = self.commits(values, WHEN)
        self.largest = largest_change(values["repo"], values["arch"],
                                      [sha for sha, _ in self.shas[:RECENT]])
        return choices

    def default_head(self, values, choices):
        return self.largest[1] if self.largest else prefer(choices, "")

    def options_base(self, values):
        return commit_choices(self.shas, WHEN)

    def default_base(self, values, choices):
        """The largest change's base with its head, else the commit before the head."""
        if self.largest and self.largest[1] == values["head"]:
            return self.largest[0]
        older = choices[choices.index(values["head"]) + 1:] if values["head"] in choices else []
        return older[0] if older else values["head"]

    def default_threshold(self, values, choices):
        return 100 * DetectionSettings.load().tolerance(COUNT_METRIC, INSTRUCTIONS_BENCHMARK)

    def options_benchmark(self, values):
        base, head = values["base"], values["head"]
        self.rows = _sorted(rows_of(values["repo"], values["arch"], {base, head}),
                            values["sort"], base, head)
        return pairs([row.key for row in self.rows])

    def default_benchmark(self, values, choices):
        """The benchmark whose count changed most."""
        ranked = _sorted(self.rows, "change", values["base"], values["head"])
        return ranked[0].key if ranked else ""


def build(state: State) -> Page:
    form = InstructionFilters(state)
    chosen = form.values
    repo, branch, base, head = (chosen[name] for name in ("repo", "branch", "base", "head"))
    threshold, selected, rows = chosen["threshold"] / 100, chosen["benchmark"], form.rows
    table = Table("benchmarks", COLUMNS, [])
    classes: Counter[str] = Counter()
    direction = direction_of(COUNT_METRIC, INSTRUCTIONS_BENCHMARK).better  # lower is better
    for row in rows:
        change = row.change(base, head)
        css = change_class(change, threshold, direction)
        classes[css if change is not None else "missing"] += 1
        table.rows.append([row.name, row.runtime, row.autograd, row.threads,
                           _whole(row.counts.get(base)), _whole(row.counts.get(head)),
                           None if change is None else round(100 * change, 3),
                           row.wall_us.get(head), row.status.get(head, "")])
        table.links.append({"benchmark": state.url("dashboards:instructions",
                                                   benchmark=row.key)})
        table.classes.append({"change %": css})
    changes = {"more": classes["worse"], "fewer": classes["better"],
               "missing": classes["missing"]}
    charted = next((row for row in rows if row.key == selected), None)
    when = dict(form.shas)
    figures = ([_trend(charted, branch, when, base, head)]
               if charted and charted.series_id else [])
    return Page(
        title="Instruction counts",
        filters={**state.values, "threshold": threshold * 100, "changes": changes},
        tables=[table], figures=figures,
        context={"form": form, "changes": changes, "rows": len(rows),
                 "largest": _largest_text(form.largest),
                 "compare_url": compare_url(repo, base, head,
                                            benchmark=INSTRUCTIONS_BENCHMARK)},
    )


def _trend(row: Row, branch: str, when: dict, base: str, head: str) -> dict:
    """The row's instructions per call at each commit of the listed ones."""
    points = (Result.objects.stored().filter(series_id=row.series_id, run__head_branch=branch,
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


def _largest_text(largest: tuple[str, str, float, str] | None) -> str:
    if not largest:
        return ""
    base, head, change, key = largest
    return (f"The largest change among the last {RECENT} commits: {key}, "
            f"{100 * change:+.2f}% from {base[:10]} to {head[:10]}.")


def _whole(count: float | None) -> int | None:
    """Instructions per call as a whole number (the table's default format keeps 4 digits)."""
    return None if count is None else round(count)


PAGE = register(FamilyPage(
    family="instructions", benchmark=INSTRUCTIONS_BENCHMARK, slug="instructions",
    label="Instructions", headline=COUNT_METRIC, template="dashboards/instructions.html",
    build=build, filters=InstructionFilters,
    columns={COUNT_METRIC: "head", WALL_METRIC: "head wall us"}, order=40))
