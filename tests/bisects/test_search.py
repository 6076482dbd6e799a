"""The search on a simulated lab: interleaved pairs of rounds, the verdicts, skips and the
log2 bound, without running anything."""

from __future__ import annotations

import math
import random

import pytest

from benchsite.bisects import search
from benchsite.bisects.search import AMBIGUOUS, CULPRIT, FAILED, NOT_REPRODUCED, Settings, Skip


class FakeLab:
    """Commit `p` measures `level(p)` with 3 % noise, 6 repetitions a round; `broken`
    positions cannot be measured; `drift` multiplies every value by a factor that changes
    with each round (the machine's load)."""

    def __init__(self, level, broken=(), drift=0.0, seed=0):
        self.level, self.broken, self.drift = level, set(broken), drift
        self.random = random.Random(seed)
        self.stored: dict[tuple[int, int], list[list[float]]] = {}
        self.log: list[int] = []

    def rounds(self, position, partner):
        return len(self.stored.get((position, partner), []))

    def values(self, position, partner):
        return [v for r in self.stored.get((position, partner), []) for v in r]

    def measure(self, position, partner):
        self.log.append(position)
        if position in self.broken:
            raise Skip(f"{position} does not build")
        load = 1 + self.drift * ((len(self.log) - 1) // 2 % 3)  # changes every pair
        self.stored.setdefault((position, partner), []).append(
            [self.level(position) * load * self.random.gauss(1, 0.03) for _ in range(6)])

    def measured(self):
        return {position for position, _ in self.stored}


def step(at, factor=4.0):
    return lambda p: 1.0 * (factor if p >= at else 1.0)


@pytest.mark.parametrize("n,at", [(24, 17), (24, 1), (24, 24), (100, 63), (7, 3)])
def test_the_culprit_within_the_log2_bound(n, at):
    lab = FakeLab(step(at))
    outcome = search.bisect(lab, n, 1, Settings())
    assert outcome.state == CULPRIT and outcome.culprit == at, outcome.message
    assert len(lab.measured()) <= math.ceil(math.log2(n)) + 3
    assert outcome.magnitude == pytest.approx(3.0, rel=0.15) and outcome.p_value < 0.05


def test_pairs_of_rounds_cancel_drift_between_comparisons():
    # The load changes 2.2x from one pair of rounds to the next: comparing rounds taken at
    # different times would call an unchanged commit slower than a 3x change's halfway.
    lab = FakeLab(step(17, 3.0), drift=1.2)
    outcome = search.bisect(lab, 24, 1, Settings())
    assert outcome.state == CULPRIT and outcome.culprit == 17, outcome.message


def test_lower_is_worse_and_an_unknown_direction():
    lab = FakeLab(step(9, 0.25))  # a throughput dropping to a quarter
    assert search.bisect(lab, 16, -1, Settings()).culprit == 9
    assert search.bisect(FakeLab(step(9, 0.25)), 16, 0, Settings()).culprit == 9


def test_no_change_or_a_change_for_the_better_is_not_reproduced():
    same = search.bisect(FakeLab(lambda p: 1.0), 24, 1, Settings())
    assert same.state == NOT_REPRODUCED and "not worse by 5%" in same.message
    better = search.bisect(FakeLab(step(5, 0.5)), 24, 1, Settings())  # faster: not worse
    assert better.state == NOT_REPRODUCED


def test_a_skipped_commit_is_stepped_over_or_named_in_the_range():
    lab = FakeLab(step(17), broken={12, 13})
    outcome = search.bisect(lab, 24, 1, Settings())
    assert outcome.state == CULPRIT and outcome.culprit == 17
    assert outcome.verdicts[12] == search.SKIPPED
    lab = FakeLab(step(17), broken={16})  # the culprit's parent does not build
    outcome = search.bisect(lab, 24, 1, Settings())
    assert outcome.state == AMBIGUOUS and outcome.candidates == [16, 17]
    assert "skipped" in outcome.message


def test_a_change_spread_over_commits_is_ambiguous_with_its_candidates():
    # Three steps of 1.6x, none half of the 4.1x (in log scale).
    lab = FakeLab(lambda p: 1.6 ** sum(p >= at for at in (6, 12, 18)))
    outcome = search.bisect(lab, 24, 1, Settings())
    assert outcome.state == AMBIGUOUS
    assert outcome.candidates == [6, 12, 24]  # 18 lies after 12, up to 24
    assert outcome.after == {6: 0, 12: 11, 24: 12}


def test_an_end_that_cannot_be_measured_fails():
    outcome = search.bisect(FakeLab(step(3), broken={0}), 8, 1, Settings())
    assert outcome.state == FAILED and "0 does not build" in outcome.message
