"""Comparing the results of two commits of a repo, series by series.

`compare_commits(repo, base_sha, head_sha, **filters) -> Comparison` reads the results of
both commits with one query (joined with their series). Each series' value at a commit is
the median of all repetitions of all its results there. A series changed when its relative
change passes its tolerance (metric thresholds of DetectionSettings, else the default) and,
where both commits have 4+ repetitions, a Mann-Whitney U test agrees (p below the compare
significance level); its status then follows the metric's better direction.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass
from statistics import median
from typing import NamedTuple

from django.db.models.fields.json import KeyTextTransform
from scipy.stats import mannwhitneyu

from benchsite.regressions.models import DetectionSettings, MetricDirection
from benchsite.results.models import Result
from runner.contract.directions import HIGHER

FILTERS = ("benchmark", "model", "backend", "mode", "dtype", "device", "arch", "metric")
REGRESSED, IMPROVED, CHANGED, UNCHANGED = "regressed", "improved", "changed", "unchanged"
MISSING_IN_BASE, MISSING_IN_HEAD = "missing_in_base", "missing_in_head"
STATUSES = (REGRESSED, IMPROVED, CHANGED, MISSING_IN_BASE, MISSING_IN_HEAD, UNCHANGED)
NO_COMMON = "no common results"
MIN_REPETITIONS = 4  # per side, for the significance test (LNT's rule)


@dataclass(frozen=True)
class Row:
    """One series in a comparison."""

    series_id: int
    benchmark: str
    model: str
    backend: str
    mode: str
    dtype: str
    device: str
    arch: str
    metric: str
    direction: str | None  # "higher" / "lower" is better; None: unknown
    tolerance: float
    base: float | None  # median of the base commit's repetitions; None: missing
    head: float | None
    base_count: int  # repetitions
    head_count: int
    change: float | None  # head / base - 1
    p_value: float | None  # Mann-Whitney U (two-sided), when both have 4+ repetitions
    status: str  # one of STATUSES ("changed": past the tolerance, direction unknown)


@dataclass(frozen=True)
class Comparison:
    repo: str
    base_sha: str
    head_sha: str
    rows: list[Row]  # regressed first (largest first), then improved, changed, missing, same

    @property
    def counts(self) -> dict[str, int]:
        found = Counter(row.status for row in self.rows)
        return {status: found.get(status, 0) for status in STATUSES}

    @property
    def verdict(self) -> str:
        """"regressed" if any series regressed, else "improved" if any improved, else
        "unchanged"; "no common results" when no series has results at both commits."""
        counts = self.counts
        if counts[REGRESSED]:
            return REGRESSED
        if not any(row.base is not None and row.head is not None for row in self.rows):
            return NO_COMMON
        return IMPROVED if counts[IMPROVED] else UNCHANGED

    def as_dict(self) -> dict:
        return {"repo": self.repo, "base": self.base_sha, "head": self.head_sha,
                "verdict": self.verdict, "counts": self.counts,
                "rows": [asdict(row) for row in self.rows]}


def compare_commits(repo: str, base_sha: str, head_sha: str, *,
                    settings: DetectionSettings | None = None,
                    **filters: str) -> Comparison:
    """Every series with results at either commit (narrowed by exact `filters` on series
    fields: benchmark, model, backend, mode, dtype, device, arch, metric), with its change
    and status, and a verdict. Raises ValueError for an unknown filter."""
    unknown = sorted(set(filters) - set(FILTERS))
    if unknown:
        raise ValueError(f"unknown filter(s) {unknown}: use {list(FILTERS)}")
    settings = settings or DetectionSettings.load()
    series_fields = [f"series__{name}" for name in FILTERS]
    rows = (Result.objects
            .filter(run__repo=repo, run__head_sha__in=[base_sha, head_sha], value__isnull=False,
                    **{f"series__{name}": value for name, value in filters.items() if value})
            .annotate(unit=KeyTextTransform("unit", "extra_info"))
            .values_list("series_id", "run__head_sha", "value", "values", "unit",
                         *series_fields))
    samples: dict[tuple[int, str], list[float]] = {}
    series: dict[int, _Series] = {}
    units: dict[int, str] = {}
    for series_id, sha, value, values, unit, *fields in rows:
        finite = [v for v in (values or [value]) if math.isfinite(v)]
        samples.setdefault((series_id, sha), []).extend(finite)
        if series_id not in series:
            series[series_id] = _Series(series_id, *fields)
            units[series_id] = unit or ""
    directions = MetricDirection.resolve(list(series.values()), units)
    tolerances: dict[tuple[str, str], float] = {}
    compared = []
    for pk, item in series.items():
        key = (item.metric, item.benchmark)
        if key not in tolerances:
            tolerances[key] = settings.tolerance(*key)
        compared.append(_row(item, directions[pk], tolerances[key],
                             samples.get((pk, base_sha), []), samples.get((pk, head_sha), []),
                             settings.compare_significance))
    order = {status: position for position, status in enumerate(STATUSES)}
    compared.sort(key=lambda row: (order[row.status], -abs(row.change or 0), row.series_id))
    return Comparison(repo, base_sha, head_sha, compared)


class _Series(NamedTuple):
    """The fields of a series a comparison needs (model instances cost 20x more)."""

    pk: int
    benchmark: str
    model: str
    backend: str
    mode: str
    dtype: str
    device: str
    arch: str
    metric: str


def _row(series: _Series, direction: str | None, tolerance: float, base: list[float],
         head: list[float], alpha: float) -> Row:
    base_value = median(base) if base else None
    head_value = median(head) if head else None
    change = p_value = None
    if base_value is None:
        status = MISSING_IN_BASE
    elif head_value is None:
        status = MISSING_IN_HEAD
    else:
        if base_value:
            change = head_value / base_value - 1
        if min(len(base), len(head)) >= MIN_REPETITIONS:
            p_value = float(mannwhitneyu(base, head, alternative="two-sided").pvalue)
            p_value = None if math.isnan(p_value) else p_value
        status = _status(base_value, head_value, change, p_value, direction, tolerance, alpha)
    return Row(series_id=series.pk, **{name: getattr(series, name) for name in FILTERS},
               direction=direction, tolerance=tolerance, base=base_value, head=head_value,
               base_count=len(base), head_count=len(head), change=change, p_value=p_value,
               status=status)


def _status(base: float, head: float, change: float | None, p_value: float | None,
            direction: str | None, tolerance: float, alpha: float) -> str:
    # From 0 (a failure recorded as 0), any move is past the tolerance.
    beyond = abs(change) > tolerance if change is not None else head != base
    if not beyond or (p_value is not None and p_value >= alpha):
        return UNCHANGED
    if direction is None:
        return CHANGED
    return IMPROVED if (head > base) == (direction == HIGHER) else REGRESSED
