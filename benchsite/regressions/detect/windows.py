"""Trailing-window helpers shared by the detectors."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def trailing(values: np.ndarray, width: int) -> np.ndarray:
    """Row t holds the `width` values before t (values[t - width : t]), NaN where that
    reaches before the start; rows for t = 0 .. len(values)."""
    padded = np.concatenate([np.full(width, np.nan), values])
    return sliding_window_view(padded, width)


def nan_medians(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Medians of the non-NaN entries of each row, and their counts (numpy's nanmedian
    goes through masked arrays for short rows, several times slower)."""
    return row_quantiles(rows, 0.5)


def row_quantiles(rows: np.ndarray, q: float) -> tuple[np.ndarray, np.ndarray]:
    """Linear-interpolated q-quantile of the non-NaN entries of each row (along the last
    axis), and their counts."""
    ordered = np.sort(rows, axis=-1)
    count = np.sum(~np.isnan(ordered), axis=-1)
    position = q * np.maximum(count - 1, 0)
    low = np.floor(position).astype(int)
    high = np.minimum(low + 1, np.maximum(count - 1, 0))
    take = np.take_along_axis
    low_value = take(ordered, low[..., None], axis=-1)[..., 0]
    high_value = take(ordered, high[..., None], axis=-1)[..., 0]
    quantile = low_value + (position - low) * (high_value - low_value)
    return np.where(count > 0, quantile, np.nan), count


def merge_flags(flags: np.ndarray, gap: int = 5) -> list[tuple[int, int]]:
    """(first, last) of runs of flagged points, where flags at most `gap` points apart
    belong to one run: one alert per episode, however many points it flags."""
    runs: list[tuple[int, int]] = []
    for index in np.flatnonzero(flags).tolist():
        if runs and index - runs[-1][1] <= gap:
            runs[-1] = (runs[-1][0], index)
        else:
            runs.append((index, index))
    return runs
