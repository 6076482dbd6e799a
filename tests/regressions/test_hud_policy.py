"""The HUD policy and the two simple baselines on constructed series."""

import numpy as np
import pytest

from benchsite.regressions.detect import hud_policy
from benchsite.regressions.detect import reference_detectors as baselines
from runner.contract.directions import HIGHER, LOWER

FLAT = [1.0, 1.01, 0.99, 1.0, 1.0, 0.99]  # the baseline window


def test_the_latest_two_violations_in_a_row_are_a_regression():
    values = FLAT + [1.0, 1.0, 1.2, 1.25]
    assert hud_policy.status(values, LOWER) == hud_policy.REGRESSION
    [found] = hud_policy.scan(values, LOWER)
    assert (found.index, found.detected_at, found.kind) == (8, 9, hud_policy.REGRESSION)
    assert found.before == pytest.approx(1.0)


def test_three_in_a_row_elsewhere_are_suspicious_and_one_is_nothing():
    assert hud_policy.status(FLAT + [1.2, 1.2, 1.2, 1.0], LOWER) == hud_policy.SUSPICIOUS
    assert hud_policy.status(FLAT + [1.0, 1.0, 1.0, 1.2], LOWER) == hud_policy.NO_REGRESSION


def test_the_direction_decides_what_violates():
    values = FLAT + [1.0, 1.0, 0.8, 0.8]
    assert hud_policy.status(values, LOWER) == hud_policy.NO_REGRESSION
    assert hud_policy.status(values, HIGHER) == hud_policy.REGRESSION
    tolerant = hud_policy.Params(tolerance=0.25)
    assert hud_policy.status(values, HIGHER, tolerant) == hud_policy.NO_REGRESSION


def test_too_few_points_are_insufficient_data():
    assert hud_policy.status(FLAT + [1.3], LOWER) == hud_policy.INSUFFICIENT
    assert hud_policy.status(FLAT + [1.3, 1.3], LOWER) == hud_policy.REGRESSION


def test_the_baseline_statistic_can_be_the_minimum():
    values = [1.0, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert hud_policy.status(values, LOWER) == hud_policy.NO_REGRESSION
    assert hud_policy.status(values, LOWER, hud_policy.Params(tolerance=0.05, statistic="min")) \
        == hud_policy.REGRESSION


def test_a_persisting_episode_is_one_detection():
    values = np.array(FLAT * 5 + [1.2] * 12 + FLAT)
    found = hud_policy.scan(values, LOWER)
    assert [d.index for d in found] == [30]


def test_bad_arguments_are_refused_with_the_name():
    with pytest.raises(ValueError, match="direction='up'"):
        hud_policy.status(FLAT * 2, "up")
    with pytest.raises(ValueError, match="statistic='mean'"):
        hud_policy.Params(statistic="mean")


def test_the_z_score_flags_a_step_once_and_the_previous_point_rule_an_outlier_twice():
    rng = np.random.default_rng(3)
    values = 10 * (1 + rng.normal(0, 0.01, 150))
    values[120:] *= 1.2
    [step] = baselines.zscore(values)
    assert step.index == 120
    values = 10 * (1 + rng.normal(0, 0.005, 150))
    values[70] *= 1.5
    assert [d.index for d in baselines.previous_point(values)] == [70]  # 70 and 71: one alert
    values[[20, 120]] *= 1.5
    assert [d.index for d in baselines.previous_point(values)] == [20, 70, 120]


def _scan_one_at_a_time(values, direction, params):
    """The policy evaluated point by point with `status`'s definitions, written plainly: the
    reference `scan_many` must agree with."""
    values = np.asarray(values, dtype=float)
    kept = np.flatnonzero(np.isfinite(values))
    x = values[kept]
    width = params.baseline + params.comparison
    worse = ((lambda point, base: point < base * (1 - params.tolerance)) if direction == HIGHER
             else (lambda point, base: point > base * (1 + params.tolerance)))
    statistic = {"median": np.median, "min": np.min, "max": np.max,
                 "earliest": lambda w: w[0], "latest": lambda w: w[-1]}[params.statistic]
    found, last_end = [], -1
    for end in range(width, len(x) + 1):
        base = statistic(x[end - width : end - params.comparison])
        flags = [worse(point, base) for point in x[end - params.comparison : end]]
        trailing = next((n for n, flag in enumerate(reversed(flags)) if not flag), len(flags))
        runs = [(n, start) for start in range(len(flags)) for n in range(1, len(flags) + 1)
                if start + n <= len(flags) and all(flags[start : start + n])]
        longest, first = max(runs, key=lambda run: (run[0], -run[1]), default=(0, 0))
        if trailing < 2 and longest < 3:
            continue
        if trailing >= 2:
            kind, start, run = hud_policy.REGRESSION, end - trailing, trailing
        else:
            kind, start, run = hud_policy.SUSPICIOUS, end - params.comparison + first, longest
        same, last_end = start <= last_end, end - 1
        if not same:
            found.append((int(kept[start]), int(kept[end - 1]), kind, float(base),
                          float(np.median(x[start : start + run]))))
    return found


def test_many_series_at_once_find_what_each_alone_does():
    """Series of several lengths (and gaps), both directions and every statistic, scanned
    together: each gets the detections the plain point-by-point policy gives it."""
    rng = np.random.default_rng(11)
    series, directions, params = [], [], []
    for number in range(120):
        values = 10 * (1 + rng.normal(0, 0.04, int(rng.integers(5, 60))))
        if number % 3 == 0:
            values[len(values) // 2:] *= rng.choice([0.85, 1.2])
        if number % 7 == 0:
            values[rng.integers(0, len(values), 3)] = np.nan
        series.append(values)
        directions.append(HIGHER if number % 2 else LOWER)
        params.append(hud_policy.Params(
            baseline=int(rng.choice([3, 6])), comparison=int(rng.choice([2, 4])),
            tolerance=float(rng.choice([0.03, 0.1])),
            statistic=hud_policy.STATISTICS[number % len(hud_policy.STATISTICS)]))
    found = hud_policy.scan_many(series, directions, params)
    assert sum(map(len, found)) > 40  # regressions and suspicious runs alike
    for values, direction, one, detections in zip(series, directions, params, found,
                                                  strict=True):
        assert [(d.index, d.detected_at, d.kind, pytest.approx(d.before),
                 pytest.approx(d.after)) for d in detections] == \
            _scan_one_at_a_time(values, direction, one)
