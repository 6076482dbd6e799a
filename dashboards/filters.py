"""Each dashboard page's filters as a Django form whose choices narrow from their parents
(repo -> benchmark -> branch -> device -> commit ...), with the defaults that answer the
usual question: the repo's default branch, the device with the most series, its newest
commit there, the benchmark's headline metric.

A form resolves its fields in order, each from the values before it, so changing a parent
keeps the children that still exist and resets the others to their defaults; what was
reset, and why, is a note on the page (`State.fallback`; JSON and CSV readers get an error
naming the parameter instead)."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Count

from benchsite import dates
from benchsite.regressions.models import DetectionSettings
from benchsite.results.models import Series
from dashboards import families
from dashboards.choices import repos_and_benchmarks, slice_choices
from dashboards.state import RANGES, State, not_one_of

ALL = "all"  # a filter's "no filter" choice where the default is one value (the busiest device)


def column_name(benchmark: str, column: str) -> str:
    """A Series column as a page names it for this benchmark: where its family page says
    the column holds something else (torchao's records name the recipe in benchmark.dtype)."""
    if column == "arch":
        return "device"
    page = families.for_benchmark(benchmark)
    labels = page.labels if page else {}
    return labels.get(column, column.replace("_", " "))


def headline_metric(benchmark: str, metrics: list[str]) -> str:
    """The metric a benchmark's dashboards lead with: its family page's, else the first
    speedup, else the first metric."""
    page = families.for_benchmark(benchmark)
    if page is not None and page.headline in metrics:
        return page.headline
    return next((m for m in metrics if "speedup" in m.lower()), metrics[0] if metrics else "")


def busiest(column: str, choices: list[str], **filters: str) -> str:
    """The value of a Series column (of `choices`) with the most series matching `filters`
    (COUNT(*): counted from the `series_busiest` index, without the table)."""
    counts = (Series.objects.filter(**filters, **{f"{column}__in": choices})
              .values(column).annotate(series=Count("*")).order_by("-series", column))
    return next((row[column] for row in counts), choices[0] if choices else "")


def busiest_arch(repo: str, benchmark: str, archs: list[str]) -> str:
    """The device (of `archs`) with the most series of the benchmark: the nightly GPU runner
    rather than a smoke job's CPU."""
    return busiest("arch", archs, repo=repo, benchmark=benchmark)


def default_branch(repo: str, branches: list[str]) -> str:
    """The repo's first default branch (the detection settings') that has results, else the
    first branch that has."""
    wanted = DetectionSettings.load().branches_for(repo)
    return next((branch for branch in wanted if branch in branches),
                branches[0] if branches else "")


def pairs(values: list[str]) -> list[tuple[str, str]]:
    """Choices whose labels are their values."""
    return [(value, value) for value in values]


def prefer(choices: list[str], wanted: str) -> str:
    return wanted if wanted in choices else choices[0] if choices else ""


_HEX_SHA = re.compile(r"[0-9a-fA-F]{7,64}")


def short_sha(sha: str | None, width: int = 10) -> str:
    """A commit's label on a page: a hex sha cut to `width` characters, anything else (an
    ad-hoc job's `adhoc-job-ID`, a ref) whole; None or "" gives ""."""
    if not sha:
        return ""
    return sha[:width] if _HEX_SHA.fullmatch(sha) else sha


def commit_choices(shas: list[tuple[str, datetime]], when: str = "%Y-%m-%d") -> list[tuple]:
    return [(sha, f"{short_sha(sha)} · {stamp:{when}}") for sha, stamp in shas]


def choice(label: str, **options: Any) -> forms.ChoiceField:
    return forms.ChoiceField(label=label, required=False, **options)


def percent(label: str, initial: float, step: float) -> forms.FloatField:
    return forms.FloatField(label=label, initial=initial, min_value=0, max_value=100,
                            required=False,
                            widget=forms.NumberInput(attrs={"step": step, "size": 4}))


class Filters(forms.Form):
    """A page's filters. Each field's choices may come from `options_<name>(values)` and its
    default from `default_<name>(values, choices)`, `values` holding the fields before it;
    otherwise the field's initial value or first choice is the default. `parents` names the
    fields a field's choices depend on (for the note when it is reset); `facets` are filters
    hidden while they offer nothing to choose."""

    parents: dict[str, tuple[str, ...]] = {}
    facets: tuple[str, ...] = ()

    def __init__(self, state: State):
        super().__init__(data={})
        self.state = state
        self.values: dict[str, Any] = {}
        for name, field in self.fields.items():
            self.values[name] = self._resolve(name, field)
        self.data = {name: _text(value) for name, value in self.values.items()}
        state.values.update(self.data)
        for name in self.facets:
            real = [value for value, _ in self.fields[name].choices if value not in ("", ALL)]
            if len(real) <= 1 and self.data[name] in ("", ALL):
                self.fields[name].widget = forms.HiddenInput()

    def facet_options(self, name: str, values: dict[str, Any]) -> list[tuple[str, str]]:
        """A facet's choices, "" (all) first; pages with facets say which."""
        raise NotImplementedError(f"{type(self).__name__} lists facets without their options")

    def _resolve(self, name: str, field: forms.Field) -> Any:
        if options := getattr(self, f"options_{name}", None):
            field.choices = options(self.values)
        elif name in self.facets:
            field.choices = self.facet_options(name, self.values)
        default = self._default(name, field)
        raw = self.state.query.get(name, "").strip()
        if raw == "":
            return default
        try:
            value = field.clean(raw)
        except ValidationError as error:
            return self._reset(name, field, raw, default, error)
        return default if value in ("", None) else value

    def _default(self, name: str, field: forms.Field) -> Any:
        choices = _choice_values(field)
        if hook := getattr(self, f"default_{name}", None):
            return hook(self.values, choices)
        if field.initial is not None:
            return field.initial
        return choices[0] if choices else ""

    def _reset(self, name, field, raw, default, error) -> Any:
        shown = self.shown(name, default)
        if isinstance(field, forms.ChoiceField):
            problem = not_one_of(raw, _choice_values(field))
            parents = ", ".join(f"{self.fields[parent].label} {self.shown(parent)}"
                                for parent in self.parents.get(name, ()))
            why = f"has no results for {parents}" if parents else "is not one of the choices"
        else:
            problem = " ".join(error.messages)
            why = f"refused: {problem[:1].lower()}{problem[1:].rstrip('.')}"
        note = f"{field.label} reset to {shown}: {raw!r} {why}."
        return self.state.fallback(name, problem, default, note)

    def shown(self, name: str, value: Any = None) -> str:
        """A value as the page shows it: a choice's label."""
        value = self.values[name] if value is None else value
        field = self.fields[name]
        if isinstance(field, forms.ChoiceField):
            label = dict(field.choices).get(value)
            if label is not None:
                return str(label)
        return _text(value) or "none"


class BranchAndDevice:
    """Branch and device choices of a filters form: those with results of the page's own
    benchmark (`BENCHMARK`) or of the chosen `benchmark`; by default the repo's default
    branch and the busiest device."""

    BENCHMARK = ""  # a page about one benchmark; else the form has a `benchmark` field

    def benchmark_of(self, values) -> str:
        return self.BENCHMARK or values["benchmark"]

    def options_branch(self, values):
        return pairs(slice_choices("branch", repo=values["repo"],
                                     benchmark=self.benchmark_of(values)))

    def default_branch(self, values, choices):
        return default_branch(values["repo"], choices)

    def options_arch(self, values):
        return pairs(slice_choices("arch", repo=values["repo"], branch=values["branch"],
                                     benchmark=self.benchmark_of(values)))

    def default_arch(self, values, choices):
        return busiest_arch(values["repo"], self.benchmark_of(values), choices)


class AnyBenchmark(BranchAndDevice):
    """Repo -> benchmark among every stored one (pytorch/ao and its busiest benchmark by
    default) -> branch -> device."""

    def options_repo(self, values):
        return pairs(repos_and_benchmarks()[0])

    def default_repo(self, values, choices):
        return prefer(choices, "pytorch/ao")

    def options_benchmark(self, values):
        return pairs(repos_and_benchmarks(values["repo"])[1])

    def default_benchmark(self, values, choices):
        return busiest("benchmark", choices, repo=values["repo"])


class TimeRange(Filters):
    """Filters with a time span: `range` (1d .. 365d, default 90d) back from now, or from
    `start` and/or to `end` (dates); `window()` is the span."""

    range = forms.ChoiceField(label="Range", choices=[(key, key) for key in RANGES],
                              initial="90d", required=False)
    start = forms.DateField(label="From", required=False,
                            widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(label="To", required=False,
                          widget=forms.DateInput(attrs={"type": "date"}))

    def window(self) -> tuple[datetime, datetime]:
        """The span the dates give (the range's length before `end` when only it is given),
        else the range up to now."""
        for name in ("start", "end"):
            problem = self.values[name] and dates.problem(_midnight(self.values[name]))
            if problem:
                self.values[name] = self.state.fallback(
                    name, problem, "", f"{self.fields[name].label} ignored: {problem}.")
        start, end = self.values["start"], self.values["end"]
        if start and end and start > end:
            start = end = self.state.fallback(
                "start", "must be before end", "",
                f"From {start} is after To {end}: showing the last {self.values['range']}.")
        self.values.update(start=start, end=end)
        self.data.update(start=_text(start), end=_text(end))
        self.state.values.update(start=_text(start), end=_text(end))
        days = timedelta(days=RANGES[self.values["range"]])
        if not start and not end:
            now = datetime.now(UTC)
            return now - days, now
        finish = _midnight(end) + timedelta(days=1) if end else datetime.now(UTC)
        return (_midnight(start) if start else finish - days), finish


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def _choice_values(field: forms.Field) -> list:
    return [value for value, _ in getattr(field, "choices", [])]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, date):
        return value.isoformat()
    return str(value)
