"""The change-point pre-filter's window statistics (rank filters, whole-array sums) against
the straightforward computation they replaced (a sort or copy of every window): equal bit
for bit, so detection gives exactly what it gave."""

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from benchsite.comparison.quantiles import nan_medians
from benchsite.regressions.detect import changepoint, windows


def rows(count: int = 6, length: int = 70, seed: int = 0) -> np.ndarray:
    """Rows with ties and repeated values, as log point values have."""
    rng = np.random.default_rng(seed)
    x = np.log(rng.uniform(1, 100, (count, 1)) * rng.normal(1, 0.05, (count, length)))
    x[0, 10:30] = x[0, 10]
    x[1, ::3] = x[1, 0]
    return x


@pytest.mark.parametrize("width", [*range(1, 36), 60, 119, 130])
def test_window_medians_sums_and_extremes_are_numpys(width):
    x = rows(length=150)
    view = sliding_window_view(x, width, axis=1)
    assert np.array_equal(windows.window_medians(x, width), np.median(view, axis=-1))
    assert np.array_equal(windows.window_sums(x, width), view.sum(axis=-1))
    [(_, high, low)] = windows.window_extremes(x, [width])
    assert np.array_equal(high, view.max(axis=-1)) and np.array_equal(low, view.min(axis=-1))


@pytest.mark.parametrize("width", [*range(1, 13), 30, 119])
def test_trailing_medians_are_nan_medians_of_the_padded_windows(width):
    x = rows(length=40)  # shorter than some widths: no window is full
    padded = np.concatenate([np.full((len(x), width), np.nan), x], axis=1)
    median, count = nan_medians(sliding_window_view(padded, width, axis=1))
    found, found_count = windows.trailing_medians(x, width)
    assert np.array_equal(found, median, equal_nan=True)
    assert np.array_equal(np.broadcast_to(found_count, count.shape), count)


def reference_batch(y: np.ndarray, params: changepoint.Params, floors: np.ndarray):
    """The pre-filter's statistics as they were computed before the rank filters."""
    gaps = np.abs(np.diff(y, axis=1))
    width = params.noise_window - 1
    padded = np.concatenate([np.full((len(y), width), np.nan), gaps], axis=1)
    trailing = sliding_window_view(padded, width, axis=1)[:, np.maximum(
        np.arange(y.shape[1]) - 1, 0)]
    median, count = nan_medians(trailing)
    noise = np.maximum(np.nan_to_num(changepoint.MAD_SCALE * median / np.sqrt(2)),
                       floors[:, None])
    df = np.maximum(1.0, changepoint.MAD_EFFICIENCY * (count - 1))
    batch = changepoint._Batch(y, params, floors)  # for t, windows and end
    t = batch.t
    after = np.full(batch.after.shape, np.nan)
    for column, a in enumerate(batch.windows):
        count_rows = y.shape[1] - a + 1 - t[0]
        if count_rows > 0:
            window = sliding_window_view(y[:, t[0]:], a, axis=1)[:, :count_rows]
            after[:, :count_rows, column] = changepoint._clipped_means(
                window, np.median(window, axis=2), params.clip * noise[:, t[:count_rows]])
    level, baseline_count = changepoint._baselines(y, t, 0, params.before,
                                                   params.clip * noise[:, t])
    critical = changepoint.special.stdtrit(df, 1 - params.alpha / 2)
    passes = changepoint._passes(after - level[..., None],
                                 changepoint._spread(noise[:, t, None], batch.windows,
                                                     baseline_count[..., None]),
                                 critical[:, t, None], params.min_magnitude)
    return batch, {"noise": noise, "df": df, "critical": critical, "after": after,
                   "passes": passes}


def labelled_series(length: int = 240, count: int = 12, seed: int = 1) -> np.ndarray:
    """Logs of series with steps up and down at known points, 0.5-5 % noise, outliers and
    a flat stretch (gaps are dropped before the batch: see `gapped`)."""
    rng = np.random.default_rng(seed)
    values = np.exp(rng.normal(0, rng.uniform(0.005, 0.05, (count, 1)), (count, length)))
    values *= rng.uniform(1, 100, (count, 1))
    for row in range(0, count, 2):
        values[row, 60 + 10 * row:] *= 1.15 if row % 4 else 0.85
    values[1, 100] *= 1.5  # outliers
    values[3, [40, 41]] *= 0.6
    values[5, 30:90] = values[5, 30]  # a constant stretch: zero differences
    return np.log(values)


@pytest.mark.parametrize("params", [
    changepoint.DEFAULT,
    changepoint.Params(noise_window=60, alpha=1e-5),
    changepoint.Params(before=10, min_before=3, min_after=2, max_after=12, noise_window=8),
], ids=["default", "window 60", "short windows"])
def test_the_batch_statistics_are_the_straightforward_ones(params):
    y = labelled_series()
    floors = np.full(len(y), 1e-3)
    batch, expected = reference_batch(y, params, floors)
    for name, value in expected.items():
        assert np.array_equal(np.broadcast_to(getattr(batch, name), value.shape), value,
                              equal_nan=True), name


def test_steps_in_series_with_gaps_are_found_where_they_start():
    y = np.exp(labelled_series())
    gapped = y.copy()
    gapped[:, 50::7] = np.nan  # missing nights
    gapped[2, 5] = -1.0  # not a positive value: skipped as well
    found = changepoint.detect_many(list(gapped), noise_floors=[1e-3] * len(y))
    for row in range(0, len(y), 2):
        start = 60 + 10 * row
        first = start if np.isfinite(gapped[row, start]) else start + 1
        assert [(d.index, d.magnitude > 0) for d in found[row]] == [(first, bool(row % 4))]
    assert [found[row] for row in range(1, len(y), 2)] == [[]] * (len(y) // 2)
