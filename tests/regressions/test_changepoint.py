"""The change-point detector on constructed series (no database)."""

import dataclasses

import numpy as np
import pytest

from benchsite.comparison import points
from benchsite.regressions.detect import changepoint


def noisy(n: int = 200, noise: float = 0.01, seed: int = 0, level: float = 5.0) -> np.ndarray:
    return level * (1 + np.random.default_rng(seed).normal(0, noise, n))


@pytest.mark.parametrize("step", [0.10, -0.10, 0.30, -0.06])
def test_a_step_is_found_where_it_starts_within_a_few_points(step):
    values = noisy()
    values[120:] *= 1 + step
    [found] = changepoint.detect(values)
    assert found.index == 120
    assert 3 <= found.delay <= 5
    assert found.magnitude == pytest.approx(step, abs=0.015)
    assert found.confidence < changepoint.DEFAULT.alpha


def test_a_clear_step_is_placed_on_one_point():
    values = noisy()
    values[120:] *= 1.10
    [found] = changepoint.detect(values)
    assert (found.earliest, found.index, found.last_good) == (120, 120, 119)


@pytest.mark.parametrize("seed", range(5))
def test_a_step_noise_leaves_open_is_a_range_that_holds_it(seed):
    # An 8 % step at 2 % noise whose point before it is halfway between the levels: it may
    # be at either, so the change is after point 118 at the latest and sure from 120 on.
    values = noisy(noise=0.02, seed=seed)
    values[120:] *= 1.08
    values[119] = 5.0 * 1.04
    [found] = changepoint.detect(values)
    assert found.index == 120  # the first point surely at the new level
    assert found.earliest <= 119 and found.last_good == found.earliest - 1
    assert found.index - found.last_good <= 4  # a likelihood interval, not a guess


def test_noise_alone_raises_nothing():
    for seed in range(20):
        assert changepoint.detect(noisy(365, noise=0.03, seed=seed)) == []


def test_a_single_outlier_is_not_a_change():
    values = noisy()
    values[100] *= 1.6
    values[150] *= 0.5
    assert changepoint.detect(values) == []


def test_a_slow_drift_is_not_a_step():
    values = noisy(365) * np.linspace(1, 1.15, 365)
    assert changepoint.detect(values) == []


def test_a_step_below_the_minimum_magnitude_is_not_raised():
    values = noisy(noise=0.002)
    values[100:] *= 1.02  # highly significant, but small
    assert changepoint.detect(values) == []
    smaller = dataclasses.replace(changepoint.DEFAULT, min_magnitude=0.01)
    assert [found.index for found in changepoint.detect(values, smaller)] == [100]


def test_two_steps_are_both_found_and_the_second_baseline_starts_at_the_first():
    values = noisy(250)
    values[80:] *= 1.2
    values[160:] *= 0.9
    found = changepoint.detect(values)
    assert [d.index for d in found] == [80, 160]
    assert found[1].before == pytest.approx(6.0, rel=0.02)  # the level after the first step


def test_detections_are_what_the_detector_raises_online():
    values = noisy(200)
    values[90:] *= 1.08
    [whole] = changepoint.detect(values)
    # Up to the point it was raised, a shorter history raises the same change...
    assert changepoint.detect(values[: whole.detected_at + 1]) == [whole]
    # ...and a point earlier, not yet.
    assert changepoint.detect(values[: whole.detected_at]) == []


def test_missing_points_are_skipped_and_indices_refer_to_the_input():
    values = noisy()
    values[120:] *= 1.1
    values[[10, 50, 119]] = np.nan
    values[60] = -1.0
    [found] = changepoint.detect(values)
    assert found.index == 120


def test_many_series_of_different_lengths_give_what_each_gives_alone():
    series = [noisy(n, seed=n) for n in (5, 60, 200, 200, 365)]
    for values in series[1:]:
        values[len(values) // 2:] *= 1.15
    assert changepoint.detect_many(series) == [changepoint.detect(v) for v in series]
    assert [len(found) for found in changepoint.detect_many(series)] == [0, 1, 1, 1, 1]


def test_repetitions_give_a_robust_point_value_and_a_noise_floor():
    matrix = points.as_matrix([[1.0, 1.01, 0.99], [2.0], [1.0, 1.02, 0.98, 1.0, 9.0], []])
    values, floor = points.summarize(matrix)
    assert values[0] == pytest.approx(1.0)  # a trimmed mean
    assert values[1] == 2.0
    assert values[2] == pytest.approx(1.0, abs=0.01)  # the 9.0 repetition is cut
    assert np.isnan(values[3])
    assert 0.005 < floor < 0.02


def test_bad_parameters_are_refused_with_the_name():
    with pytest.raises(ValueError, match="min_after=0"):
        changepoint.Params(min_after=0)
    with pytest.raises(ValueError, match="alpha=2"):
        changepoint.Params(alpha=2)


def test_on_a_noiseless_series_a_blip_is_not_a_change_but_a_step_is():
    flat = np.full(60, 100.0)
    blip = flat.copy()
    blip[[30, 31]] = 80.0  # two bad nights, then back
    assert changepoint.detect(blip) == []
    step = flat.copy()
    step[30:] = 104.5  # memory grew 4.5 %
    [found] = changepoint.detect(step)
    assert (found.index, found.delay) == (30, 3)
