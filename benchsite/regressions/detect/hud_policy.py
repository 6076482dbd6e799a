"""The PyTorch HUD's daily regression policy (see shared/reference/anchors.md).

A baseline window of `baseline` points precedes a comparison window of `comparison`
points; the baseline value is a statistic of the baseline window (median by default); a
point violates when it is worse than baseline x (1 -/+ tolerance). "regression": the latest
2+ points of the comparison window violate in a row; "suspicious": 3+ in a row elsewhere
in it; "insufficient data": fewer than 2 comparison points. Windows count points (runs),
the HUD's days for nightly series.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from benchsite.comparison.better import HIGHER, LOWER
from benchsite.regressions.detect import Detection

STATISTICS = ("median", "min", "max", "earliest", "latest")
# A series' status under the policy (its regression page shows it).
REGRESSION, SUSPICIOUS, INSUFFICIENT = "regression", "suspicious", "insufficient data"
NO_REGRESSION = "ok"


@dataclass(frozen=True)
class Params:
    baseline: int = 6
    comparison: int = 4
    tolerance: float = 0.05  # speedup 0.95x; latency 1.15x is 0.15
    statistic: str = "median"

    def __post_init__(self) -> None:
        if self.statistic not in STATISTICS:
            raise ValueError(f"statistic={self.statistic!r}: must be one of {STATISTICS}")
        if self.baseline < 1 or self.comparison < 2:
            raise ValueError("baseline >= 1 and comparison >= 2 points are needed")
        if not 0 <= self.tolerance < 1:
            raise ValueError(f"tolerance={self.tolerance}: must be in [0, 1)")


DEFAULT = Params()


def scan(values: np.ndarray, direction: str, params: Params = DEFAULT) -> list[Detection]:
    """The policy evaluated after every point that completes both windows: one detection
    per episode (a violating run still flagged at the next evaluation is the same one).
    Points that are not finite are skipped; indices refer to `values`."""
    return scan_many([values], [direction], [params])[0]


def scan_many(series: Sequence[np.ndarray], directions: Sequence[str],
              params: Sequence[Params]) -> list[list[Detection]]:
    """`scan` of many series at once: those with as many finite points, the same direction
    and the same parameters are evaluated together (one series at a time, numpy's per-call
    costs made it 0.66 ms a series under the profiler, a quarter of a night's detection)."""
    kept, finite = [], []
    for values in series:
        values = np.asarray(values, dtype=float)
        kept.append(np.flatnonzero(np.isfinite(values)))
        finite.append(values[kept[-1]])
    together: dict[tuple, list[int]] = {}
    for number, (x, direction, one) in enumerate(zip(finite, directions, params, strict=True)):
        if len(x) >= one.baseline + one.comparison:
            together.setdefault((len(x), direction, one), []).append(number)
    found: list[list[Detection]] = [[] for _ in series]
    for (_, direction, one), numbers in together.items():
        x = np.stack([finite[number] for number in numbers])
        baselines, trailing, longest, first = _evaluated(x, direction, one)
        flagged = (trailing >= 2) | (longest >= 3)
        for row in np.flatnonzero(flagged.any(axis=1)).tolist():
            number = numbers[row]
            found[number] = _episodes(x[row], kept[number], baselines[row], trailing[row],
                                      longest[row], first[row], flagged[row], one)
    return found


def _evaluated(x: np.ndarray, direction: str, params: Params) -> tuple[np.ndarray, ...]:
    """For series x (rows of equal length) and each evaluation (a point completing both
    windows): the baseline, the trailing run of violations and the longest run and its
    start in the comparison window."""
    baselines = _statistic(sliding_window_view(x[:, :-params.comparison], params.baseline,
                                               axis=1), params.statistic)
    comparison = sliding_window_view(x, params.comparison, axis=1)[:, params.baseline:]
    violates = _violations(comparison, baselines[..., None], direction, params.tolerance)
    return baselines, _trailing_runs(violates), *_longest_runs(violates)


def _episodes(x: np.ndarray, kept: np.ndarray, baselines: np.ndarray, trailing: np.ndarray,
              longest: np.ndarray, first: np.ndarray, flagged: np.ndarray,
              params: Params) -> list[Detection]:
    """One series' detections, one an episode, from its flagged evaluations."""
    width = params.baseline + params.comparison
    found: list[Detection] = []
    last_end = -1
    for row in np.flatnonzero(flagged).tolist():
        end = row + width  # points 0 .. end - 1 seen
        if trailing[row] >= 2:
            kind, start, run = REGRESSION, end - int(trailing[row]), int(trailing[row])
        else:
            kind, run = SUSPICIOUS, int(longest[row])
            start = end - params.comparison + int(first[row])
        same_episode = start <= last_end
        last_end = end - 1
        if same_episode:
            continue
        found.append(Detection(index=int(kept[start]), detected_at=int(kept[end - 1]),
                               before=float(baselines[row]),
                               after=float(np.median(x[start : start + run])),
                               confidence=float(run), kind=kind))
    return found


def status(values: np.ndarray, direction: str, params: Params = DEFAULT) -> str:
    """The policy's verdict on the latest points: regression, suspicious, insufficient data
    or ok. Before a full comparison window, it is the points after the first baseline."""
    values = np.asarray(values, dtype=float)
    x = values[np.isfinite(values)]
    if len(x) < params.baseline + 2:
        return INSUFFICIENT
    split = max(params.baseline, len(x) - params.comparison)
    comparison = x[split:][None, :]
    baseline = _statistic(x[split - params.baseline : split][None, :], params.statistic)
    violates = _violations(comparison, baseline[:, None], direction, params.tolerance)
    if _trailing_runs(violates)[0] >= 2:
        return REGRESSION
    return SUSPICIOUS if _longest_runs(violates)[0][0] >= 3 else NO_REGRESSION


def _violations(points: np.ndarray, baseline: np.ndarray, direction: str,
                tolerance: float) -> np.ndarray:
    if direction == HIGHER:
        return points < baseline * (1 - tolerance)
    if direction == LOWER:
        return points > baseline * (1 + tolerance)
    raise ValueError(f"direction={direction!r}: must be {HIGHER!r} or {LOWER!r}")


def _statistic(windows: np.ndarray, name: str) -> np.ndarray:
    """The statistic of each window (the last axis)."""
    if name == "median":
        return np.median(windows, axis=-1)
    if name == "min":
        return windows.min(axis=-1)
    if name == "max":
        return windows.max(axis=-1)
    return windows[..., 0] if name == "earliest" else windows[..., -1]


def _trailing_runs(flags: np.ndarray) -> np.ndarray:
    """Length of the run of True at the end of each row (the last axis)."""
    alive = np.ones(flags.shape[:-1], dtype=bool)
    run = np.zeros(flags.shape[:-1], dtype=int)
    for column in range(flags.shape[-1] - 1, -1, -1):
        alive &= flags[..., column]
        run += alive
    return run


def _longest_runs(flags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Length and start of the longest run of True in each row (the last axis)."""
    current = np.zeros(flags.shape[:-1], dtype=int)
    best = np.zeros(flags.shape[:-1], dtype=int)
    first = np.zeros(flags.shape[:-1], dtype=int)
    for column in range(flags.shape[-1]):
        current = np.where(flags[..., column], current + 1, 0)
        longer = current > best
        best = np.where(longer, current, best)
        first = np.where(longer, column - current + 1, first)
    return best, first
