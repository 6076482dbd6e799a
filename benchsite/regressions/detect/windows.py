"""Trailing-window helpers shared by the detectors (row medians and quantiles:
`benchsite.comparison.quantiles`)."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def trailing(values: np.ndarray, width: int) -> np.ndarray:
    """Row t holds the `width` values before t (values[t - width : t]), NaN where that
    reaches before the start; rows for t = 0 .. len(values)."""
    padded = np.concatenate([np.full(width, np.nan), values])
    return sliding_window_view(padded, width)


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
