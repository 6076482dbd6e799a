"""Which way is better for a metric: the site's one door. Detection, the nightly report,
commit comparisons, the pages' colours, bisects and the admin all ask here.

An admin's override (`MetricDirection`) for the metric in that benchmark comes first, then
one for the metric in every benchmark, then the record contract's answer
(`runner.contract.directions`: its table, else inference from the name and unit). Each
answer carries the rule that gave it. `HIGHER` and `LOWER` are re-exported for the layers
above, which do not import the contract's module themselves.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from benchsite.comparison.models import DIRECTIONS, MetricDirection
from runner.contract.directions import HIGHER, LOWER, Direction, direction

__all__ = ["DIRECTIONS", "HIGHER", "LOWER", "Direction", "better_for", "direction_of",
           "directions_for", "metric_directions", "without_override"]


class SeriesLike(Protocol):
    pk: int
    metric: str
    benchmark: str


def directions_for(series: Iterable[SeriesLike], units: dict[int, str]) -> dict[int, Direction]:
    """Direction and its rule per series id (`units[series id]`: the unit the contract's
    inference may read), with one query for the overrides."""
    series = list(series)
    overrides = _overrides({item.metric for item in series})
    answers: dict[tuple[str, str, str], Direction] = {}  # thousands of series, few metrics
    found = {}
    for item in series:
        key = (item.metric, item.benchmark, units.get(item.pk) or "")
        if key not in answers:
            answers[key] = _judged(overrides, *key)
        found[item.pk] = answers[key]
    return found


def better_for(series: Iterable[SeriesLike], units: dict[int, str]) -> dict[int, str | None]:
    """`directions_for`, the answer alone: HIGHER, LOWER or None (unknown)."""
    return {pk: judged.better for pk, judged in directions_for(series, units).items()}


def direction_of(metric: str, benchmark: str, unit: str = "") -> Direction:
    """The direction of one (metric, benchmark, unit)."""
    return _judged(_overrides({metric}), metric, benchmark, unit)


def metric_directions(benchmark: str, metrics: Iterable[str],
                      unit: str = "") -> dict[str, Direction]:
    """The direction of each of a benchmark's metrics, with one query."""
    metrics = set(metrics)
    overrides = _overrides(metrics)
    return {metric: _judged(overrides, metric, benchmark, unit) for metric in metrics}


def without_override(metric: str, benchmark: str, unit: str = "") -> Direction:
    """The contract's answer, as if no override were set (the admin shows it beside one)."""
    return direction(metric, benchmark, unit)


def _overrides(metrics: set[str]) -> dict[tuple[str, str], MetricDirection]:
    if not metrics:
        return {}
    return {(row.metric, row.benchmark): row
            for row in MetricDirection.objects.filter(metric__in=metrics)}


def _judged(overrides: dict[tuple[str, str], MetricDirection], metric: str, benchmark: str,
            unit: str) -> Direction:
    row = overrides.get((metric, benchmark)) or overrides.get((metric, ""))
    if row is not None:
        return Direction(row.direction, f"override: {row}")
    return direction(metric, benchmark, unit)
