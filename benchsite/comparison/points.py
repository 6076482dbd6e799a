"""From repetitions to one value per point, and the noise the repetitions alone show.

A point is one run of a benchmark; its repetitions share the run's machine state, so they
are not independent samples of the series' level. Detectors therefore test point values
against point-to-point noise, and use the repetitions for a robust point value (a trimmed
mean: a single bad repetition cannot move it, yet it is nearly as efficient as the mean)
and for a floor under the noise estimate.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from benchsite.comparison.quantiles import nan_medians

# The smallest relative noise assumed, so that a perfectly stable series is not divided by 0.
MIN_NOISE = 1e-4


def as_matrix(repetitions: Sequence[Sequence[float]]) -> np.ndarray:
    """Ragged repetitions as a (points, max repetitions) array padded with NaN."""
    width = max((len(reps) for reps in repetitions), default=1) or 1
    matrix = np.full((len(repetitions), width), np.nan)
    for row, reps in enumerate(repetitions):
        matrix[row, : len(reps)] = reps
    return matrix


def summarize(matrix: np.ndarray) -> tuple[np.ndarray, float]:
    """Point values (trimmed means of the finite, positive repetitions: a quarter, at least
    one, cut from each end when there are 3 or more) and the relative noise floor the
    repetitions imply for them. Points with no usable repetition are NaN."""
    clean = np.where(np.isfinite(matrix) & (matrix > 0), matrix, np.nan)
    ordered = np.sort(clean, axis=1)  # NaN last
    count = np.sum(~np.isnan(ordered), axis=1)
    cut = np.where(count >= 3, np.maximum(1, count // 4), 0)
    kept = count - 2 * cut
    position = np.arange(ordered.shape[1])[None, :]
    inside = (position >= cut[:, None]) & (position < (count - cut)[:, None])
    total = np.where(inside, np.nan_to_num(ordered), 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.where(kept > 0, total / np.maximum(kept, 1), np.nan)
    return values, _repetition_floor(np.log(ordered), count)


def _repetition_floor(logs: np.ndarray, count: np.ndarray) -> float:
    """Median over points of the repetitions' scaled MAD / sqrt(repetitions), in log units."""
    several = count >= 3
    if not several.any():
        return MIN_NOISE
    rows = logs[several]
    with np.errstate(invalid="ignore"):
        spread = 1.4826 * nan_medians(np.abs(rows - nan_medians(rows)[0][:, None]))[0]
    floor = float(np.median(spread / np.sqrt(count[several])))
    return max(floor, MIN_NOISE)
