"""Window helpers shared by the detectors (row medians and quantiles:
`benchsite.comparison.quantiles`)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy import ndimage


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


def window_medians(x: np.ndarray, width: int) -> np.ndarray:
    """`np.median` of every window x[:, i : i + width] of the rows of finite x, bit for bit:
    the middle order statistics from a running rank filter (scipy's, O(log width) a window
    on one dimension), not a sort of each window."""
    take = slice(width // 2, width // 2 + x.shape[1] - width + 1)  # a window's filter centre
    low = _order_statistic(x, (width - 1) // 2, width)[:, take]
    if width % 2:
        return low
    return (low + _order_statistic(x, width // 2, width)[:, take]) / 2


def trailing_medians(x: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """For the rows of finite x and t = 0 .. len: the median of x[:, max(0, t - width) : t]
    and its count, bit for bit as `nan_medians` gives them for those windows NaN-padded (NaN
    where empty). Instead of NaN, a window reaching before the start holds -inf and +inf
    pads, so many of each that its values' lower middle is always the window's order
    statistic (width - 1) // 2 and the upper middle the next: two rank filters."""
    middle = (width - 1) // 2
    pads = np.arange(width + 1)
    minus = middle - (width - pads - 1) // 2  # -inf among the last p pads
    pad = np.where(np.diff(minus) == 1, -np.inf, np.inf)[::-1]
    padded = np.concatenate([np.broadcast_to(pad, (len(x), width)), x], axis=1)
    take = slice(width // 2, width // 2 + x.shape[1] + 1)
    low = _order_statistic(padded, middle, width)[:, take]
    high = _order_statistic(padded, middle + 1, width)[:, take] if width > 1 else low
    count = np.minimum(np.arange(x.shape[1] + 1), width)
    # As `row_quantiles`: the lower middle, plus half the way to the upper for even counts.
    position = 0.5 * np.maximum(count - 1, 0)
    high = np.where(count > 1, high, low)  # one value: both middles are it
    with np.errstate(invalid="ignore"):
        median = low + (position - np.floor(position)) * (high - low)
    return np.where(count > 0, median, np.nan), count


def window_sums(x: np.ndarray, width: int) -> np.ndarray:
    """`np.sum` of every window x[:, i : i + width] of the rows of x, bit for bit, in
    `width` + 7 whole-array additions instead of a reduction a window (up to 128 values,
    numpy's pairwise summation adds a window in order when it holds fewer than 8, else in
    8 interleaved partial sums combined pairwise, the last width % 8 added in order)."""
    count = x.shape[1] - width + 1
    if width > 128:  # numpy splits such windows in halves: its own reduction
        return sliding_window_view(x, width, axis=1).sum(axis=-1)

    def column(i: int) -> np.ndarray:
        return x[:, i : i + count]

    whole = width - width % 8 if width >= 8 else 0
    if whole:
        part = [column(j).copy() for j in range(8)]
        for start in range(8, whole, 8):
            for j in range(8):
                part[j] += column(start + j)
        total = ((part[0] + part[1]) + (part[2] + part[3])) + (
            (part[4] + part[5]) + (part[6] + part[7]))
    else:
        total = column(0).copy()
        whole = 1
    for i in range(whole, width):
        total += column(i)
    return total


def window_extremes(x: np.ndarray, widths) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(width, maxima, minima) of the windows x[:, i : i + width] of the rows of x for each
    of `widths` (increasing), each width's from the one before."""
    high, low, width = x.copy(), x.copy(), 1
    for wanted in widths:
        for _ in range(width, wanted):
            count = x.shape[1] - width
            high = np.maximum(high[:, :count], x[:, width:])
            low = np.minimum(low[:, :count], x[:, width:])
            width += 1
        yield wanted, high, low


def _order_statistic(x: np.ndarray, rank: int, width: int) -> np.ndarray:
    """The rank-th smallest of the `width` values around each entry of x (a window starts
    `width // 2` before its entry), along the rows; windows across rows are never used."""
    return ndimage.rank_filter(x.ravel(), rank, size=width).reshape(x.shape)
