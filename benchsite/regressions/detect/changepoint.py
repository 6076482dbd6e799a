"""Step-change detection: robust two-window tests, walked in time order.

For a candidate first-bad point t, the level of the points from t on is compared with the
level of up to `before` points before t (never reaching back past the previous change).
Levels are winsorised means of log values (clipped at `clip` noise units around each
window's median, so one outlier moves a level by little); the noise is the scaled MAD of
point-to-point differences before t (steps and outliers barely move it); the difference is
tested like a t statistic with the noise estimate's effective degrees of freedom, and must
also reach `min_magnitude`.

Time order: at each point T (oldest first) the detector asks whether a change has happened
among the last `max_after` points. A quick pre-filter over fixed after-window lengths finds
the points T where some candidate passes; there the change is located as the best two-level
split of the recent points (least Huber cost), and raised when that split has `min_after`
points after it, itself passes the test, and the newest point is nearer the new level than
the old (two outliers in a row are not a change). Where noise leaves the place open, the
change is a range: every split whose cost is within `LIKELIHOOD_INTERVAL` of the best one's
(next to it) may be the first bad point, and the detection's `index` is the last of them, the
first point surely at the new level, with `earliest` the first. The next change is looked
for after it. Each
decision uses points up to T only, so `detected_at` is when it would have been raised
online, and a single outlier, which never makes `min_after` points, is never a change.

In the spirit of E-divisive with a t-test (Apache Otava/Hunter), but windowed, median/MAD
based and confirmed by several points.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy import special, stats

from benchsite.comparison.points import MIN_NOISE
from benchsite.comparison.quantiles import nan_medians
from benchsite.regressions.detect import Detection
from benchsite.regressions.detect.windows import (
    trailing_medians,
    window_extremes,
    window_medians,
    window_sums,
)

AFTER_WINDOWS = (3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 25, 30)
MAD_SCALE = 1.4826
MAD_EFFICIENCY = 0.37  # a MAD estimate of sigma is worth this share of a standard deviation
BATCH = 256  # series pre-filtered together (memory: ~series x points x 60 floats)
HUBER = 1.5  # residuals beyond this many noise units count linearly when locating
# The Huber cost is the negative log-likelihood of Huber's least favourable distribution in
# noise units, so the splits within this of the best form a 95 % likelihood interval of the
# change's place (the labelled series' steps: 95 % of them inside it, most 1-2 points wide).
LIKELIHOOD_INTERVAL = float(stats.chi2.ppf(0.95, 1) / 2)


@dataclass(frozen=True)
class Params:
    before: int = 30  # points in the baseline window, at most
    min_before: int = 6  # points the baseline needs
    min_after: int = 3  # points at the new level before a change is raised
    max_after: int = 30  # the longest after window tested
    # Points whose differences give the noise. A MAD is worth 0.37 of a standard deviation,
    # so 120 points give ~44 degrees of freedom (60 gave ~22): the test's critical value
    # drops enough for 5 % steps at 5 % noise to be found twice as often, with `alpha`
    # halved to keep false alarms near where they were (perf/detectors.py).
    noise_window: int = 120
    min_magnitude: float = 0.04  # relative change below which nothing is raised
    alpha: float = 5e-6  # two-sided significance level
    clip: float = 2.5  # winsorising limit, in noise units

    def __post_init__(self) -> None:
        if not 1 <= self.min_before <= self.before:
            raise ValueError(f"min_before={self.min_before}: must be in 1..before")
        if not 1 <= self.min_after <= self.max_after:
            raise ValueError(f"min_after={self.min_after}: must be in 1..max_after")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha={self.alpha}: must be between 0 and 1")
        if self.min_magnitude < 0 or self.clip <= 0 or self.noise_window < 3:
            raise ValueError("min_magnitude >= 0, clip > 0 and noise_window >= 3 are needed")


DEFAULT = Params()


def detect(values: np.ndarray, params: Params = DEFAULT,
           noise_floor: float = MIN_NOISE) -> list[Detection]:
    """Changes in a series of point values, oldest first. Non-positive and non-finite points
    are skipped (indices still refer to `values`); `noise_floor` is the smallest relative
    noise assumed (see `points.summarize`)."""
    return detect_many([values], params, [noise_floor])[0]


def detect_many(series: Sequence[np.ndarray], params: Params = DEFAULT,
                noise_floors: Sequence[float] | None = None) -> list[list[Detection]]:
    """`detect` on many series at once: series of equal length share the vectorised
    pre-filter (an upload's series mostly are), which is most of the work."""
    floors = noise_floors if noise_floors is not None else [MIN_NOISE] * len(series)
    kept, logs = [], []
    for values in series:
        values = np.asarray(values, dtype=float)
        kept.append(np.flatnonzero(np.isfinite(values) & (values > 0)))
        logs.append(np.log(values[kept[-1]]))
    by_length: dict[int, list[int]] = {}
    for number, y in enumerate(logs):
        if len(y) >= params.min_before + params.min_after:
            by_length.setdefault(len(y), []).append(number)
    found: list[list[Detection]] = [[] for _ in series]
    for numbers in by_length.values():
        for start in range(0, len(numbers), BATCH):
            chunk = numbers[start : start + BATCH]
            batch = _Batch(np.stack([logs[n] for n in chunk]), params,
                           np.array([floors[n] for n in chunk]))
            for row in np.flatnonzero(batch.passes.any(axis=(1, 2))):
                number = chunk[row]
                points = kept[number]
                found[number] = [
                    Detection(index=int(points[last]), earliest=int(points[first]),
                              detected_at=int(points[end - 1]),
                              before=float(np.exp(before)), after=float(np.exp(after)),
                              confidence=p)
                    for first, last, end, before, after, p in _Series(batch, row).changes()]
    return found


class _Batch:
    """The pre-filter of series of one length: the statistics of every (candidate first
    bad point t, after-window length a) pair, with baselines reaching back to the start.
    Window medians come from running rank filters and unclipped windows' means from their
    plain sums, so no window is copied or sorted, yet every statistic is bit for bit the
    one the straightforward computation (`_baselines`, `_clipped_means`) gives."""

    def __init__(self, y: np.ndarray, params: Params, noise_floors: np.ndarray):
        self.y, self.params = y, params
        count, n = y.shape
        noise, df = _trailing_noise(y, params.noise_window)
        self.noise = np.maximum(noise, noise_floors[:, None])  # of one point, before index
        # (The same for every series of a batch: computed once a point.)
        self.df = np.broadcast_to(df, (count, n))
        self.critical = np.broadcast_to(special.stdtrit(df, 1 - params.alpha / 2),
                                        (count, n))  # |z| needed
        self.windows = np.array([a for a in AFTER_WINDOWS
                                 if params.min_after <= a <= params.max_after])
        self.t = np.arange(params.min_before, n - params.min_after + 1)
        self.end = self.t[:, None] + self.windows[None, :]  # raised at end - 1
        self.after = np.full((count, *self.end.shape), np.nan)
        limit = params.clip * self.noise[:, self.t]
        recent = y[:, self.t[0]:]
        for column, (a, high, low) in enumerate(window_extremes(recent, self.windows)):
            rows = n - a + 1 - self.t[0]
            if rows > 0:
                self.after[:, :rows, column] = _window_levels(
                    recent, a, limit[:, :rows], high[:, :rows], low[:, :rows])
        level, baseline_count = _trailing_levels(y, self.t, params.before, limit)
        self.passes = _passes(self.after - level[..., None],
                              _spread(self.noise[:, self.t, None], self.windows,
                                      baseline_count[..., None]),
                              self.critical[:, self.t, None], params.min_magnitude)


class _Series:
    """The time-ordered walk over one series of a batch."""

    def __init__(self, batch: _Batch, row: int):
        self.params, self.windows, self.t, self.end = (batch.params, batch.windows, batch.t,
                                                       batch.end)
        self.y, self.noise = batch.y[row], batch.noise[row]
        self.df, self.critical = batch.df[row], batch.critical[row]
        self.after, self.passes = batch.after[row], batch.passes[row].copy()

    def changes(self):
        """(earliest and last first bad index, end, level before, level after, p-value) of
        each change; the levels are those either side of its likeliest place."""
        params = self.params
        start, looked = 0, -1
        while True:
            later = self.passes & (self.end > looked)
            if not later.any():
                return
            looked = int(self.end[later].min())
            index, first, last = self._locate(looked, start)
            if looked - index < params.min_after:
                continue  # the change, if it is one, has too few points yet
            before, count = self._baselines(np.array([index]), start)
            after = self._window_mean(index, looked)
            spread = _spread(self.noise[index], looked - index, count[0])
            if not _passes(after - before[0], spread, self.critical[index],
                           params.min_magnitude):
                continue
            newest = self.y[looked - 1]
            if abs(newest - after) > abs(newest - before[0]):
                continue  # the newest point is back at the old level: a blip, so far
            z = (after - before[0]) / spread
            yield first, last, looked, float(before[0]), after, float(
                2 * special.stdtr(self.df[index], -abs(z)))
            start = last
            self._rebase(start)

    def _rebase(self, start: int) -> None:
        """Pre-filter again with baselines that begin no earlier than `start` (the latest
        change): only candidates less than `before` points after it change."""
        rows = (self.t >= start) & (self.t < start + self.params.before)
        t = self.t[rows]
        level, count = self._baselines(t, start)
        self.passes[rows] = _passes(
            self.after[rows] - level[:, None],
            _spread(self.noise[t, None], self.windows, count[:, None]),
            self.critical[t, None], self.params.min_magnitude)
        self.passes[self.t < start + self.params.min_before] = False

    def _baselines(self, t: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray]:
        level, count = _baselines(self.y[None, :], t, start, self.params.before,
                                  self.params.clip * self.noise[None, t])
        return level[0], count[0]

    def _window_mean(self, index: int, end: int) -> float:
        window = self.y[index:end]
        return float(_clipped_means(window, np.median(window),
                                    self.params.clip * self.noise[index]))

    def _locate(self, end: int, start: int) -> tuple[int, int, int]:
        """Where a change before `end` is: the split of the recent points (back to the
        latest change) into two levels with the least Huber cost of the residuals from each
        part's median, and the first and last of the run of splits around it whose cost is
        within `LIKELIHOOD_INTERVAL` of it. (Winsorised means would hide an old-level point
        inside an after window and place changes early.)"""
        params = self.params
        low = max(start, end - params.max_after - params.before)
        t = np.arange(max(start + params.min_before, end - params.max_after), end)
        span = self.y[low:end]
        left = np.arange(len(span))[None, :] < (t - low)[:, None]
        left_median = nan_medians(np.where(left, span, np.nan))[0]
        right_median = nan_medians(np.where(left, np.nan, span))[0]
        scaled = np.abs(span - np.where(left, left_median[:, None], right_median[:, None]))
        scaled /= self.noise[t[0]]
        cost = np.where(scaled <= HUBER, scaled**2 / 2, HUBER * (scaled - HUBER / 2)).sum(axis=1)
        best = int(np.argmin(cost))
        near = cost <= cost[best] + LIKELIHOOD_INTERVAL
        first = last = best
        while first > 0 and near[first - 1]:
            first -= 1
        while last < len(t) - 1 and near[last + 1]:
            last += 1
        return int(t[best]), int(t[first]), int(t[last])


def _spread(noise, a, b):
    """Standard error of a difference of levels over a and b points."""
    with np.errstate(divide="ignore"):
        return noise * np.sqrt(1 / a + 1 / b)


def _passes(log_change, spread, critical, min_magnitude: float):
    """Significant (|z| at least the critical value) and large enough."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return ((np.abs(log_change / spread) >= critical)
                & (np.abs(np.expm1(log_change)) >= min_magnitude))


def _baselines(y: np.ndarray, t: np.ndarray, start: int, width: int,
               limit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Winsorised means (and counts) of the baseline windows of candidates t: the `width`
    points before each, not reaching before `start`; y is (series, points)."""
    index = t[:, None] - width + np.arange(width)[None, :]
    window = np.where(index >= start, y[:, np.maximum(index, 0)], np.nan)
    median, count = nan_medians(window)
    return _clipped_means(window, median, limit), count


def _window_levels(x: np.ndarray, width: int, limit: np.ndarray, high: np.ndarray,
                   low: np.ndarray) -> np.ndarray:
    """Winsorised means of the windows x[:, i : i + width] of finite x (their maxima `high`
    and minima `low`), for i below limit's columns: the plain mean where no value is
    clipped (most windows)."""
    rows = limit.shape[1]
    median = window_medians(x, width)[:, :rows]
    means = window_sums(x, width)[:, :rows] / width
    clipped = (high > median + limit) | (low < median - limit)
    windows = sliding_window_view(x, width, axis=1)[:, :rows]
    means[clipped] = _clipped_means(windows[clipped], median[clipped], limit[clipped])
    return means


def _trailing_levels(y: np.ndarray, t: np.ndarray, width: int,
                     limit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_baselines(y, t, 0, width, limit)` for candidates t (consecutive), from rank
    filters and plain sums: where a window reaches before the start, its missing values
    count as 0 in the sum (as `_clipped_means` counts them) and never as its extremes."""
    median, count = trailing_medians(y, width)
    columns = slice(t[0], t[-1] + 1)
    median, count = median[:, columns], count[columns]

    def filled(value: float) -> np.ndarray:
        return np.concatenate([np.full((len(y), width), value), y], axis=1)

    means = window_sums(filled(0.0), width)[:, columns] / count
    (_, high, _), = window_extremes(filled(-np.inf), [width])
    (_, _, low), = window_extremes(filled(np.inf), [width])
    clipped = (high[:, columns] > median + limit) | (low[:, columns] < median - limit)
    windows = sliding_window_view(filled(np.nan), width, axis=1)[:, columns]
    means[clipped] = _clipped_means(windows[clipped], median[clipped], limit[clipped])
    return means, np.broadcast_to(count, means.shape)


def _trailing_noise(y: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """For each series (row) and index t: the noise of one point, from the differences among
    the `window` points before t, and the effective degrees of freedom of that estimate (the
    same for every row)."""
    gaps = np.abs(np.diff(y, axis=1))
    median, count = trailing_medians(gaps, window - 1)
    # Index t's differences are those among points t - window .. t - 1 (t = 0: none).
    rows = np.maximum(np.arange(y.shape[1]) - 1, 0)
    noise = MAD_SCALE * median[:, rows] / np.sqrt(2)
    return np.nan_to_num(noise), np.maximum(1.0, MAD_EFFICIENCY * (count[rows] - 1))


def _clipped_means(windows: np.ndarray, median, limit) -> np.ndarray:
    """Means of the non-NaN entries of each window (last axis) clipped to its median +-
    limit."""
    median, limit = np.asarray(median)[..., None], np.asarray(limit)[..., None]
    clipped = np.clip(windows, median - limit, median + limit)
    valid = ~np.isnan(clipped)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(valid, clipped, 0.0).sum(axis=-1) / valid.sum(axis=-1)
