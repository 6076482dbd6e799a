"""Paired, interleaved timing: the pairs, the interval, adaptive stopping and what it
reports, exactly, with a fake clock."""

import math
import statistics

import pytest

from runner.engine.paired import (
    STOPPED_BUDGET,
    STOPPED_CI,
    STOPPED_PAIRS,
    PairedTiming,
    median_interval,
    sample_pairs,
)
from runner.engine.timing_data import TimingSettings


class DriftingMachine:
    """A fake clock whose machine gets slower as time goes on: a call of nominal cost c
    started at time t takes c * (1 + drift * t). Both sides pay the same slowdown at the
    same moment, as under a neighbour's growing load."""

    def __init__(self, drift: float = 0.0, jitter: list[float] | None = None):
        self.now = 0.0
        self.drift = drift
        self.jitter = jitter or [0.0]
        self.calls = 0

    def clock(self) -> float:
        return self.now

    def model(self, cost: float):
        def call() -> None:
            noise = self.jitter[self.calls % len(self.jitter)]
            self.now += cost * (1 + self.drift * self.now) * (1 + noise)
            self.calls += 1
        return call


def test_the_interval_of_the_median_is_the_sign_test_order_statistics():
    # n = 10: P(Binomial(10, 1/2) <= 1) = 11/1024 <= 2.5% < P(<= 2) = 56/1024, so k = 2.
    values = [float(v) for v in range(10, 0, -1)]
    assert median_interval(values) == (2.0, 9.0)
    # n = 6: only the extremes (2 / 64 = 3.1% two-sided); n = 5 has no 95% interval.
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) == (1.0, 6.0)
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0]) is None
    # n = 400: k = 180 (scipy.stats.binom.cdf(179, 400, 0.5) = 0.0201, cdf(180) = 0.0255).
    low, high = median_interval([float(v) for v in range(1, 401)])
    assert (low, high) == (180.0, 221.0)


def test_each_pair_runs_a_b_b_a_b_a_a_b_and_gives_one_ratio():
    order = []

    def side(name, ms):
        def block():
            order.append(name)
            return ms
        return block

    settings = TimingSettings(min_pairs=6, max_pairs=6, ci_target=0.5, budget_s=10)
    paired = sample_pairs(side("a", 2.0), side("b", 1.0), settings, calls=(3, 5))
    assert order == ["a", "b", "b", "a", "b", "a", "a", "b"] * 6
    assert paired.ratios == (2.0,) * 6 and paired.speedup == 2.0
    assert paired.baseline.samples_ms == (2.0,) * 24 and paired.baseline.calls_per_sample == 3
    assert paired.candidate.samples_ms == (1.0,) * 24 and paired.candidate.calls_per_sample == 5
    assert paired.ci == (2.0, 2.0) and paired.half_width == 0.0
    assert paired.stopped == STOPPED_CI and not paired.unstable


def test_a_slowly_drifting_machine_does_not_bias_the_paired_ratio_but_biases_two_windows():
    """A/A: the same cost on both sides, on a machine 5% slower every 100 ms. Timing one side
    and then the other (the window method) reads the drift as a speedup; pairs do not."""
    from runner.engine.torch_timers import pair_cpu, time_cpu

    settings = TimingSettings(samples=30, warmup_s=0.01, min_sample_s=0.002, min_pairs=10,
                              max_pairs=10, budget_s=100)
    machine = DriftingMachine(drift=0.5)
    first = time_cpu(machine.model(0.0001), settings, clock=machine.clock)
    second = time_cpu(machine.model(0.0001), settings, clock=machine.clock)
    window_speedup = first.median_ms / second.median_ms
    assert abs(window_speedup - 1) > 0.01  # the window method sees a 1%+ "change"

    machine = DriftingMachine(drift=0.5)
    paired = pair_cpu(machine.model(0.0001), machine.model(0.0001), settings,
                      clock=machine.clock)
    assert paired.speedup == pytest.approx(1.0, abs=0.001)
    assert paired.ci[0] - 1e-6 <= 1.0 <= paired.ci[1] + 1e-6  # drift cancels to first order


class SteppingMachine(DriftingMachine):
    """A fake clock whose machine turns 30% slower at `step_s`, as when a neighbour starts."""

    def __init__(self, step_s: float):
        super().__init__()
        self.step_s = step_s

    def model(self, cost: float):
        def call() -> None:
            self.now += cost * (1.3 if self.now >= self.step_s else 1.0)
            self.calls += 1
        return call


def test_a_neighbour_starting_mid_measurement_does_not_bias_the_paired_ratio():
    """A true 2x speedup, the machine 30% slower from 0.09 s on (between the two windows).
    Two windows read 1.54x; pairs read 2x, only the pair across the step is off."""
    from runner.engine.torch_timers import pair_cpu, time_cpu

    settings = TimingSettings(samples=40, warmup_s=0.0, min_sample_s=0.002, min_pairs=20,
                              max_pairs=20, budget_s=100)
    machine = SteppingMachine(step_s=0.09)
    baseline = time_cpu(machine.model(0.0002), settings, clock=machine.clock)
    assert machine.now < 0.09
    candidate = time_cpu(machine.model(0.0001), settings, clock=machine.clock)
    assert baseline.median_ms / candidate.median_ms == pytest.approx(2 / 1.3)

    machine = SteppingMachine(step_s=0.09)
    paired = pair_cpu(machine.model(0.0002), machine.model(0.0001), settings,
                      clock=machine.clock)
    assert machine.now > 0.09 + 0.1  # the step fell well inside the pairs
    assert paired.speedup == pytest.approx(2.0, rel=1e-6)
    assert sum(abs(ratio - 2.0) > 1e-6 for ratio in paired.ratios) == 1
    assert paired.ci[0] <= 2.0 <= paired.ci[1]


def test_a_true_speedup_is_found_with_its_interval():
    from runner.engine.torch_timers import pair_cpu

    machine = DriftingMachine(drift=0.1, jitter=[0.0, 0.03, -0.02, 0.05, -0.04, 0.01, 0.0])
    settings = TimingSettings(warmup_s=0.0, min_sample_s=0.001, budget_s=100)
    paired = pair_cpu(machine.model(0.0003), machine.model(0.0001), settings,
                      clock=machine.clock)
    assert paired.speedup == pytest.approx(3.0, rel=0.03)
    low, high = paired.ci
    assert low <= paired.speedup <= high and (high - low) / 2 / paired.speedup <= 0.02
    assert paired.stopped == STOPPED_CI


def test_steady_cells_stop_early_and_noisy_cells_get_more_pairs_until_the_budget():
    steady = sample_pairs(lambda: 1.0, lambda: 1.0, TimingSettings(min_pairs=8))
    assert steady.pairs == 8 and steady.stopped == STOPPED_CI

    now = [0.0]
    noise = iter([1.0, 1.5, 0.7, 1.3, 0.8, 1.4, 0.6] * 1000)

    def noisy() -> float:
        now[0] += 0.01
        return next(noise)

    settings = TimingSettings(min_pairs=8, budget_s=1.0, ci_target=0.02)
    paired = sample_pairs(noisy, noisy, settings, clock=lambda: now[0])
    assert paired.stopped == STOPPED_BUDGET and paired.pairs > 8
    assert 0.99 <= now[0] <= 1.09  # eight blocks of 10 ms a pair, checked after each pair
    assert paired.unstable
    assert paired.instability("eager").startswith(
        f"unstable eager speedup: 95% CI ±{paired.half_width:.1%} after {paired.pairs} pairs "
        "(target ±2.0%, stopped by budget)")

    capped = sample_pairs(noisy, noisy, TimingSettings(min_pairs=8, max_pairs=10,
                                                       budget_s=100))
    assert capped.pairs == 10 and capped.stopped == STOPPED_PAIRS


def test_the_cells_budget_stops_the_pairs_even_before_min_pairs():
    """A call of a second with three seconds left of the cell: one pair, and it says so."""
    from runner.engine.paired import STOPPED_CELL_BUDGET, cell_budget_note

    now = [0.0]

    def second() -> float:
        now[0] += 1.0
        return 1000.0

    settings = TimingSettings(min_pairs=8, budget_s=2.0, cell_budget_s=3.0)
    paired = sample_pairs(second, second, settings, clock=lambda: now[0])
    assert paired.pairs == 1 and now[0] == 8.0  # the pair it started, and no other
    assert paired.stopped == STOPPED_CELL_BUDGET and paired.unstable
    assert cell_budget_note(paired, "eager", settings) == (
        "eager speedup: measured 1 of 8 pairs: cell budget spent")
    steady = sample_pairs(lambda: 1.0, lambda: 1.0, settings)
    assert steady.stopped == STOPPED_CI and cell_budget_note(steady, "eager", settings) is None


def test_too_few_pairs_have_no_interval_and_are_unstable():
    paired = PairedTiming((1.0,) * 4, (1.0,) * 4, (1.0, 1.0))
    assert paired.ci is None and math.isinf(paired.half_width) and paired.unstable
    assert "no interval" in paired.instability("eager")
    summary = paired.summary()
    assert summary["ci_low"] is None and summary["unstable"] is True and summary["pairs"] == 2


def test_a_paired_timing_round_trips_and_summarises():
    paired = sample_pairs(iter([2.0, 2.2] * 100).__next__, lambda: 1.0,
                          TimingSettings(min_pairs=8, max_pairs=8))
    assert PairedTiming.from_dict(paired.to_dict()) == paired
    assert paired.summary() == {
        "ci_low": 2.1, "ci_high": 2.1, "confidence": 0.95, "pairs": 8, "ci_target": 0.02,
        "stopped_by": "ci", "unstable": False,
    }
    assert paired.measured_s == pytest.approx(statistics.fsum(
        paired.baseline.samples_ms + paired.candidate.samples_ms) / 1000)
