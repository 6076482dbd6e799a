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
