"""Compilers page (`/compilers/`): the PyTorch HUD's summary of compiler backends - one row per
backend, one column per suite, for passrate, geomean speedup, mean compile time and memory
compression ratio - each "base → new" for two commits (default: the latest two), with a
per-model table for one backend and suite (`/compilers/models/`).

As on the HUD, a model passes when its accuracy is pass-like (the HUD's list, see
benchsite.results.ingest.summaries) and its speedup is not 0; passrate counts the models
with an accuracy result, and the geomean speedup is over the models that did not fail (every
model where none was verified). Both pages read only the two commits' results of the chosen slice
(one row per model and metric), whatever the size of the database.

Speedups the runner timed paired with eager (runner.paired) carry a 95% interval in their
extra_info; a geomean's interval combines its models' (`geomean_interval`). A change of a
speedup inside the noise (the two intervals overlap, or either is unstable) is not coloured
as a gain or loss: past the threshold it is marked "≈" and greyed. The intervals show in each
speedup cell's tooltip and in the values table. The HUD's own records have no interval and
are coloured as before.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property

from django.db.models import Case, When
from django.utils.html import escape
from django.utils.safestring import mark_safe

from benchsite.comparison import outcomes
from benchsite.comparison.directions import metric_directions
from benchsite.results.fields import OrjsonField
from benchsite.results.ingest.summaries import PASS_VALUES
from benchsite.results.models import Result
from dashboards.choices import slice_options, summary_choices
from dashboards.families import FamilyPage, SubPage, register
from dashboards.filters import choice, commit_choices, pairs, percent, prefer
from dashboards.pages.common import (
    Interval,
    change_class,
    compare_url,
    geomean_interval,
    interval_of,
    page_url,
    within_noise,
)
from dashboards.pages.family import FamilyFilters
from dashboards.render import HTML_ROWS, Page, Table
from dashboards.state import State
from runner.contract.names import COMPILERS_BENCHMARK, CompilerMetric

ACCURACY, SPEEDUP = CompilerMetric.ACCURACY, CompilerMetric.SPEEDUP
COMPILE, MEMORY = CompilerMetric.COMPILE_TIME, CompilerMetric.COMPRESSION
METRICS = (ACCURACY, SPEEDUP, COMPILE, MEMORY)
TITLES = {ACCURACY: "passrate", SPEEDUP: "geomean speedup", COMPILE: "mean compile time",
          MEMORY: "memory compression ratio"}
MODEL_COLUMNS = {SPEEDUP: "speedup", ACCURACY: "accuracy", COMPILE: "compile time",
                 MEMORY: "compression ratio"}  # the models page's, after "model"
# Where a model's (or a geomean's) speedup interval is kept beside its metrics; not a metric.
INTERVAL = "speedup interval"
NOISY = "≈ "  # marks a change past the threshold that is inside the noise


@dataclass(frozen=True)
class Scope:
    repo: str
    benchmark: str
    mode: str
    arch: str
    dtype: str
    base: str
    new: str
    threshold: float  # relative change that colours speedup, passrate and compile time
    memory_threshold: float  # the HUD judges memory more loosely

    def results(self, **series):
        """The two commits' results of the chosen slice and metrics."""
        return Result.objects.of_commits(self.repo, {self.base, self.new}).in_slice(
            benchmark=self.benchmark, mode=self.mode, arch=self.arch, dtype=self.dtype,
            metric=METRICS, **series)

    def threshold_of(self, metric: str) -> float:
        return self.memory_threshold if metric == MEMORY else self.threshold

    @cached_property
    def directions(self) -> dict[str, str | None]:
        """A passrate is judged as pass/fail outcomes are; the others as the site's
        directions say (an admin's override, else the contract's table), asked once, when
        a change past its threshold first needs it."""
        found = metric_directions(COMPILERS_BENCHMARK, (SPEEDUP, COMPILE, MEMORY))
        return {ACCURACY: outcomes.DIRECTION,
                **{metric: judged.better for metric, judged in found.items()}}


class CompilerFilters(FamilyFilters):
    """Repo -> benchmark (those with compile times: HUD-shaped records) -> branch -> device
    -> the two commits -> mode -> precision."""

    REPO = "pytorch/pytorch"

    benchmark = choice("Benchmark")
    base = choice("Base")
    new = choice("New")
    mode = choice("Mode")
    dtype = choice("Precision")
    threshold = percent("Threshold %", 5, 0.5)
    memory_threshold = percent("Memory threshold %", 20, 1)
    parents = {"benchmark": ("repo",), "branch": ("repo", "benchmark"),
               "arch": ("repo", "benchmark", "branch"),
               "base": ("repo", "benchmark", "branch", "arch"),
               "new": ("repo", "benchmark", "branch", "arch"),
               "mode": ("new", "arch"), "dtype": ("new", "arch", "mode")}
    field_order = ["repo", "benchmark", "branch", "arch", "new", "base", "mode", "dtype"]

    def options_repo(self, values):
        return pairs(slice_options(("repo",), metric=COMPILE)["repo"])

    def options_benchmark(self, values):
        return pairs(slice_options(("benchmark",), repo=values["repo"],
                                   metric=COMPILE)["benchmark"])

    def default_benchmark(self, values, choices):
        return prefer(choices, COMPILERS_BENCHMARK)

    def options_new(self, values):
        return self.commits(values)

    def options_base(self, values):
        return commit_choices(self.shas)

    def default_base(self, values, choices):
        """The commit before the new one."""
        older = choices[choices.index(values["new"]) + 1:] if values["new"] in choices else []
        return older[0] if older else values["new"]

    def _where(self, values) -> dict:
        return {"repo": values["repo"], "benchmark": values["benchmark"],
                "run__head_sha": values["new"], "arch": values["arch"]}

    def options_mode(self, values):
        return pairs(summary_choices("mode", **self._where(values)))

    def default_mode(self, values, choices):
        return prefer(choices, "inference")

    def options_dtype(self, values):
        return pairs(summary_choices("dtype", **self._where(values), mode=values["mode"]))


class ModelFilters(CompilerFilters):
    """One backend and suite of the chosen slice."""

    backend = choice("Backend")
    suite = choice("Suite")
    parents = {**CompilerFilters.parents, "backend": ("repo", "benchmark"),
               "suite": ("repo", "benchmark")}

    def options_backend(self, values):
        self.options = slice_options(("backend", "suite"), repo=values["repo"],
                                     benchmark=values["benchmark"], metric=SPEEDUP)
        return pairs(self.options["backend"])

    def options_suite(self, values):
        return pairs(self.options["suite"])


@dataclass
class TitledTable(Table):
    """A table whose cells may carry a tooltip (per row: column name -> text)."""

    titles: list[dict[str, str]] = field(default_factory=list)

    def html_body(self) -> str:
        body = super().html_body()
        if not any(self.titles):
            return body
        # Every value is escaped in the body, so "<td " starts a cell and nothing else.
        lines = str(body).split("\n")
        for r, titles in enumerate(self.titles[:min(HTML_ROWS, len(self.rows))]):
            if not titles:
                continue
            cells = lines[r].split("<td ")
            for column, title in titles.items():
                at = self.columns.index(column) + 1
                cells[at] = f'title="{escape(title)}" ' + cells[at]
            lines[r] = "<td ".join(cells)
        return mark_safe("\n".join(lines))  # noqa: S308 - the body and titles are escaped


def scope(form: CompilerFilters) -> Scope:
    """The page's slice of results, from its filters."""
    chosen = form.values
    return Scope(chosen["repo"], chosen["benchmark"], chosen["mode"], chosen["arch"],
                 chosen["dtype"], chosen["base"], chosen["new"], chosen["threshold"] / 100,
                 chosen["memory_threshold"] / 100)


def build(state: State) -> Page:
    form = CompilerFilters(state)
    chosen = scope(form)
    models: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for key, measured in _per_model(chosen.results()).items():
        sha, backend, suite, _model = key
        models[sha, backend, suite].append(measured)
    summary: dict[tuple[str, str, str], dict[str, float | tuple | None]] = defaultdict(dict)
    intervals: dict[tuple[str, str], dict[str, Interval | None]] = defaultdict(dict)
    for (sha, backend, suite), measured in models.items():
        aggregate = _aggregate(measured)
        intervals[backend, suite][sha] = aggregate.pop(INTERVAL, None)
        for metric, value in aggregate.items():
            summary[metric, backend, suite][sha] = value
    backends = sorted({backend for _, backend, _ in summary})
    suites = sorted({suite for _, _, suite in summary})
    tables = [_matrix(state, chosen, metric, backends, suites, summary, intervals)
              for metric in METRICS]
    tables.append(_values(chosen, summary, intervals))
    return Page(title="Compilers", filters=dict(state.values), tables=tables,
                context={"form": form, "missing": not summary,
                         "compare_url": _compare_url(chosen),
                         "intervals": any(i is not None for shas in intervals.values()
                                          for i in shas.values())})


def _compare_url(chosen: Scope) -> str:
    return compare_url(chosen.repo, chosen.base, chosen.new, benchmark=chosen.benchmark)


def _per_model(results) -> dict[tuple[str, str, str, str], dict]:
    """{(sha, backend, suite, model): {metric: value, or the accuracy string}}, and the
    speedup's interval under INTERVAL where its record carries one (extra_info is read for
    the speedup rows only)."""
    found: dict[tuple[str, str, str, str], dict] = defaultdict(dict)
    speedup_info = Case(When(series__metric=SPEEDUP, then="extra_info"),
                        output_field=OrjsonField())
    rows = results.values_list("run__head_sha", "series__backend", "series__suite",
                               "series__model", "series__metric", "value", "string_values",
                               speedup_info)
    for sha, backend, suite, model, metric, value, strings, info in rows:
        measured = found[sha, backend, suite, model]
        measured[metric] = (strings or [None])[0] if metric == ACCURACY else value
        if metric == SPEEDUP:
            measured[INTERVAL] = interval_of(info)
    return found


def _failed(measured: dict) -> bool:
    """The HUD's rule: an accuracy that is not pass-like, or a speedup of 0."""
    if ACCURACY not in measured:
        return False
    return measured[ACCURACY] not in PASS_VALUES or measured.get(SPEEDUP) == 0


def _aggregate(models: list[dict]) -> dict[str, float | tuple[int, int] | Interval | None]:
    """One commit's summary of one backend and suite; the geomean speedup's interval under
    INTERVAL where a model has one."""
    summary: dict[str, float | tuple[int, int] | Interval | None] = {}
    judged = [measured for measured in models if ACCURACY in measured]
    if judged:
        summary[ACCURACY] = (sum(not _failed(measured) for measured in judged), len(judged))
    speedups = [(measured[SPEEDUP], measured.get(INTERVAL)) for measured in models
                if not _failed(measured) and _finite(measured.get(SPEEDUP))
                and measured[SPEEDUP] > 0]
    if speedups:
        summary[SPEEDUP] = math.exp(sum(math.log(value) for value, _ in speedups)
                                    / len(speedups))
        interval = geomean_interval(speedups)
        if interval is not None:
            summary[INTERVAL] = interval
    for metric in (COMPILE, MEMORY):
        values = [measured[metric] for measured in models if _finite(measured.get(metric))]
        if values:
            summary[metric] = sum(values) / len(values)
    return summary


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def _number(metric: str, value) -> float | None:
    """A summary value as one number (passrate as a fraction)."""
    if value is None:
        return None
    if metric == ACCURACY:
        passed, total = value
        return passed / total
    return value


def _text(metric: str, value) -> str:
    if value is None:
        return "—"
    if metric == ACCURACY:
        passed, total = value
        return f"{100 * passed / total:.0f}%, {passed}/{total}"
    if metric == COMPILE:
        return f"{value:.1f}s"
    return f"{value:.2f}x"


def _change(metric: str, base, new) -> float | None:
    old, now = _number(metric, base), _number(metric, new)
    if old is None or now is None or old == 0 or not math.isfinite(now * old):
        return None
    return now / old - 1


def base_to_new(chosen: Scope, metric: str, values: dict,
                intervals: dict | None = None) -> tuple[str, str]:
    """("base → new" text, CSS class) of one cell; one commit shows only its value.

    With `intervals` ({sha: Interval or None}, speedups only) a change inside the noise is
    not coloured: past the threshold it is marked NOISY and greyed ("noise"); an unstable
    speedup alone is greyed too."""
    base, new = values.get(chosen.base), values.get(chosen.new)
    intervals = intervals or {}
    base_interval, new_interval = intervals.get(chosen.base), intervals.get(chosen.new)
    if chosen.base == chosen.new:
        return _text(metric, new), "noise" if _unstable(new_interval) else ""
    change = _change(metric, base, new)
    if metric == ACCURACY and base is not None and new is not None and base[0] > new[0]:
        return f"{_text(metric, base)} → {_text(metric, new)}", "worse"  # the HUD's rule
    threshold = chosen.threshold_of(metric)
    past = change is not None and abs(change) > threshold  # only then does a direction matter
    css = change_class(change, threshold, chosen.directions[metric] if past else None)
    text = f"{_text(metric, base)} → {_text(metric, new)}"
    if within_noise(base_interval, new_interval):
        if css:  # past the threshold, inside the noise: neither gain nor loss
            return NOISY + text, "noise"
        return text, "noise" if _unstable(base_interval) or _unstable(new_interval) else ""
    return text, css


def _unstable(interval: Interval | None) -> bool:
    return interval is not None and interval.unstable


def interval_title(chosen: Scope, intervals: dict) -> str:
    """A speedup cell's tooltip: each commit's 95% interval; "" when neither has one."""
    shas = [chosen.new] if chosen.base == chosen.new else [chosen.base, chosen.new]
    known = [(sha, intervals.get(sha)) for sha in shas]
    if all(interval is None for _, interval in known):
        return ""
    lines = [f"{'new' if sha == chosen.new else 'base'} {sha[:10]}: "
             f"{interval.describe() if interval else 'no 95% CI'}" for sha, interval in known]
    if len(known) == 2 and within_noise(*(interval for _, interval in known)):
        lines.append("inside the noise: not coloured")
    return "\n".join(lines)


def _matrix(state, chosen, metric, backends, suites, summary, intervals) -> Table:
    table = TitledTable(TITLES[metric], ["backend", *suites], [])
    for backend in backends:
        row, classes, links, titles = [backend], {}, {}, {}
        for suite in suites:
            values = summary.get((metric, backend, suite))
            if values is None:
                row.append(None)
                continue
            shown = intervals.get((backend, suite), {}) if metric == SPEEDUP else None
            text, classes[suite] = base_to_new(chosen, metric, values, shown)
            if shown and (title := interval_title(chosen, shown)):
                titles[suite] = title
            row.append(text)
            links[suite] = state.url("dashboards:compiler-models", backend=backend,
                                     suite=suite)
        table.rows.append(row)
        table.classes.append(classes)
        table.links.append(links)
        table.titles.append(titles)
    return table


def _values(chosen, summary, intervals) -> Table:
    """The same numbers, one per row (for CSV and JSON readers); a geomean speedup's 95%
    intervals and whether its change is inside the noise, where its records carry them."""
    table = Table("values", ["metric", "backend", "suite", "base", "new", "change %",
                             "base 95% CI", "new 95% CI", "within noise"], [])
    for (metric, backend, suite), values in sorted(summary.items()):
        change = _change(metric, values.get(chosen.base), values.get(chosen.new))
        shown = intervals.get((backend, suite), {}) if metric == SPEEDUP else {}
        base_ci, new_ci = shown.get(chosen.base), shown.get(chosen.new)
        noisy = (within_noise(base_ci, new_ci) if base_ci is not None or new_ci is not None
                 else None)
        table.rows.append([TITLES[metric], backend, suite,
                           _number(metric, values.get(chosen.base)),
                           _number(metric, values.get(chosen.new)),
                           None if change is None else round(100 * change, 2),
                           base_ci and base_ci.describe(), new_ci and new_ci.describe(),
                           noisy])
    return table


def build_models(state: State) -> Page:
    """One backend and suite: each model's numbers, base → new."""
    form = ModelFilters(state)
    chosen = scope(form)
    backend, suite = form.values["backend"], form.values["suite"]
    found: dict[str, dict[str, dict]] = defaultdict(lambda: defaultdict(dict))
    measured_by = _per_model(chosen.results(backend=backend, suite=suite))
    for (sha, _backend, _suite, model), measured in measured_by.items():
        for metric, value in measured.items():
            found[model][metric][sha] = value
    table = TitledTable("models", ["model", *MODEL_COLUMNS.values()], [])
    for model in sorted(found):
        row, classes, titles = [model], {}, {}
        intervals = found[model].get(INTERVAL, {})
        for metric, column in MODEL_COLUMNS.items():
            text, classes[column] = _model_cell(chosen, metric, found[model].get(metric, {}),
                                                intervals)
            row.append(text)
        if title := interval_title(chosen, intervals):
            titles[MODEL_COLUMNS[SPEEDUP]] = title
        table.rows.append(row)
        table.classes.append(classes)
        table.titles.append(titles)
        table.links.append({"model": page_url(
            "dashboards:explorer", repo=chosen.repo, benchmark=chosen.benchmark, model=model,
            backend=backend, mode=chosen.mode, arch=chosen.arch, range="90d")})
    return Page(title=f"Compilers: {backend} on {suite}",
                filters=dict(state.values), tables=[table],
                context={"form": form, "missing": not found, "models": True,
                         "intervals": any(i is not None for measured in found.values()
                                          for i in measured.get(INTERVAL, {}).values()),
                         "compare_url": _compare_url(chosen),
                         "summary_url": state.url("dashboards:compilers", backend=None,
                                                  suite=None)})


def _model_cell(chosen: Scope, metric: str, values: dict,
                intervals: dict) -> tuple[str, str]:
    if metric == SPEEDUP:
        return base_to_new(chosen, metric, values, intervals)
    if metric != ACCURACY:
        return base_to_new(chosen, metric, values)
    base, new = values.get(chosen.base), values.get(chosen.new)
    if chosen.base == chosen.new:
        return new or "—", ""
    passed = [value in PASS_VALUES if value else None for value in (base, new)]
    css = ("worse" if passed == [True, False] else "better" if passed == [False, True]
           else "")
    return f"{base or '—'} → {new or '—'}", css


PAGE = register(FamilyPage(
    family="compilers", benchmark=COMPILERS_BENCHMARK, slug="compilers", label="Compilers",
    headline=SPEEDUP, template="dashboards/compilers.html", build=build,
    filters=CompilerFilters, columns=TITLES, order=20,
    subpages=(SubPage("models", "compiler-models", build_models),)))
