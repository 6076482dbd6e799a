"""The bisection itself, apart from where measurements come from (`Lab`) and are kept.

Positions 0..n are the commits from the good end (0) to the bad end (n). Every comparison
of two commits is interleaved on this worker: rounds of the two alternate (ABBA: a then b,
then b then a...) and the comparison uses the repetitions of its own rounds only, so the
machine's drift between comparisons (other load, temperature) cancels. It uses every such
repetition (a two-sided Mann-Whitney U test, as the compare API, with at least
MIN_REPETITIONS values a side) and adds pairs of rounds until its verdict is clear or it has
`max_rounds` pairs:

1. Both ends first: unless the bad end is worse than the good one (significant, and by at
   least `min_change`), the outcome is "not reproduced".
2. Binary search: each commit is compared with the good end; it is bad-like when it is at
   least halfway (in log scale) from the good end to the bad end. A commit that fails to
   build or run is skipped (`git bisect skip`): the nearest untested commit is measured
   instead.
3. The last good-like and first bad-like commits are compared with each other: a culprit
   when they differ in the regression's direction by at least half the original change (in
   log scale, as the halfway point: a 4x slowdown needs a 2x step).
   Otherwise "ambiguous", listing the measured steps that carry part of the change; with
   skipped commits between them, "ambiguous" names that range and says which were skipped.

Deterministic given the measurements, so a bisect whose worker died replays what was stored
and measures only what is missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import median
from typing import Protocol

from scipy import stats

from benchsite.comparison.judge import MIN_REPETITIONS

CULPRIT, NOT_REPRODUCED, AMBIGUOUS, FAILED = "culprit", "not_reproduced", "ambiguous", "failed"
GOOD, BAD, SKIPPED = "good", "bad", "skipped"
CANDIDATE_SHARE = 0.25  # of the original change: a measured step that carries part of it


class Skip(Exception):
    """A commit that cannot be measured (it does not build, or its run fails)."""


class Lab(Protocol):
    def rounds(self, position: int, partner: int) -> int:
        """Rounds measured at the commit in its comparison with `partner`."""

    def values(self, position: int, partner: int) -> list[float]:
        """Every repetition of those rounds."""

    def measure(self, position: int, partner: int) -> None:
        """Measure one more round at the commit for its comparison with `partner`; Skip
        when the commit cannot be measured."""


@dataclass(frozen=True)
class Settings:
    alpha: float = 0.05
    max_rounds: int = 4  # pairs of rounds in one comparison
    same_rounds: int = 2  # pairs of rounds before two commits may be judged alike
    min_change: float = 0.05  # relative change of the ends that reproduces a regression


@dataclass(frozen=True)
class Pair:
    """Two commits' repetitions compared: the relative change of the medians from `a` to
    `b`, and the Mann-Whitney p-value (1 with too few repetitions)."""

    a: int
    b: int
    change: float
    p_value: float
    rounds: int  # pairs of rounds


@dataclass
class Outcome:
    state: str
    message: str
    culprit: int | None = None
    candidates: list[int] = field(default_factory=list)
    after: dict[int, int] = field(default_factory=dict)  # a candidate's last good-like commit
    magnitude: float | None = None  # the culprit pair's relative change
    p_value: float | None = None
    original_change: float | None = None
    worse: int = 0  # +1: higher values are worse, -1: lower ones
    verdicts: dict[int, str] = field(default_factory=dict)


def judge(lab: Lab, a: int, b: int) -> Pair:
    va, vb = lab.values(a, b), lab.values(b, a)
    if not va or not vb:
        raise Skip(f"no values at position {a if not va else b}")
    ma, mb = median(va), median(vb)
    change = mb / ma - 1 if ma else (math.inf if mb else 0.0)
    p = 1.0
    if min(len(va), len(vb)) >= MIN_REPETITIONS:
        p = float(stats.mannwhitneyu(va, vb, alternative="two-sided").pvalue)
        p = 1.0 if math.isnan(p) else p
    return Pair(a, b, change, p, min(lab.rounds(a, b), lab.rounds(b, a)))


def compare(lab: Lab, a: int, b: int, settings: Settings, clear) -> Pair:
    """Pairs of rounds of `a` and `b` (a then b, then b then a, ...) until `clear(pair)` or
    max_rounds pairs."""
    while True:
        done = min(lab.rounds(a, b), lab.rounds(b, a))
        if done and lab.rounds(a, b) == lab.rounds(b, a):
            pair = judge(lab, a, b)
            if clear(pair) or done >= settings.max_rounds:
                return pair
        for position, partner in ((a, b), (b, a)) if done % 2 == 0 else ((b, a), (a, b)):
            if lab.rounds(position, partner) == done:
                lab.measure(position, partner)


def log_change(change: float) -> float:
    return math.log1p(change) if change > -1 else -math.inf


def bisect(lab: Lab, n: int, worse: int, settings: Settings) -> Outcome:
    """Bisect positions 0..n; `worse` is +1 when higher values are worse, -1 when lower ones
    are, 0 when unknown (then the ends' own change is the regression)."""
    verdicts: dict[int, str] = {}

    def alike(pair: Pair, size: float) -> bool:
        return pair.rounds >= settings.same_rounds and abs(pair.change) < size

    try:
        ends = compare(lab, 0, n, settings, lambda pair: pair.p_value < settings.alpha
                       or alike(pair, settings.min_change / 2))
    except Skip as skipped:
        return Outcome(FAILED, f"an end of the range could not be measured: {skipped}")
    observed = worse or (1 if ends.change > 0 else -1)
    if ends.p_value >= settings.alpha or ends.change * observed < settings.min_change:
        return Outcome(NOT_REPRODUCED, (
            f"the bad end is {ends.change:+.1%} from the good end (Mann-Whitney p="
            f"{ends.p_value:.2g}, {ends.rounds} interleaved round(s) each): not worse by "
            f"{settings.min_change:.0%} or more at significance {settings.alpha:g}"),
            original_change=ends.change, p_value=ends.p_value, worse=observed,
            verdicts={0: GOOD, n: GOOD})
    verdicts.update({0: GOOD, n: BAD})
    span = log_change(ends.change)
    fractions = {0: 0.0, n: 1.0}
    lo, hi, skipped = 0, n, set()
    while True:
        untested = sorted((p for p in range(lo + 1, hi) if p not in skipped),
                          key=lambda p: (abs(p - (lo + hi) // 2), -p))
        if not untested:
            break
        mid = untested[0]
        try:
            fractions[mid] = _fraction(lab, mid, span, settings)
            verdicts[mid] = BAD if fractions[mid] >= 0.5 else GOOD
        except Skip:
            skipped.add(mid)
            verdicts[mid] = SKIPPED
            continue
        lo, hi = (lo, mid) if verdicts[mid] == BAD else (mid, hi)
    base = Outcome("", "", original_change=ends.change, worse=observed, verdicts=verdicts)
    between = sorted(p for p in skipped if lo < p < hi)
    if between:
        base.state, base.candidates = AMBIGUOUS, [*between, hi]
        base.after = dict.fromkeys(base.candidates, lo)
        base.message = (f"the change is in the range after position {lo} up to {hi}; "
                        f"{len(between)} commit(s) in it were skipped (they did not build or "
                        "run), so it cannot be narrowed to one commit")
        return base
    pair = compare(lab, lo, hi, settings, lambda pair: pair.p_value < settings.alpha
                   or alike(pair, abs(ends.change) * CANDIDATE_SHARE))
    base.magnitude, base.p_value = pair.change, pair.p_value
    if pair.p_value < settings.alpha and log_change(pair.change) / span >= 0.5:
        base.state, base.culprit = CULPRIT, hi
        base.message = (f"{pair.change:+.1%} from its parent (Mann-Whitney p="
                        f"{pair.p_value:.2g}), of {ends.change:+.1%} over the range")
        return base
    base.state = AMBIGUOUS
    ordered = sorted(fractions)
    base.after = {b: a for a, b in zip(ordered, ordered[1:], strict=False)
                  if fractions[b] - fractions[a] >= CANDIDATE_SHARE} or {hi: lo}
    base.candidates = list(base.after)
    base.message = (f"no single commit carries half of the {ends.change:+.1%} change (the "
                    f"last step, {pair.change:+.1%}, p={pair.p_value:.2g}): it is spread over "
                    f"the candidates (each somewhere after the commit measured before it)")
    return base


def _fraction(lab: Lab, mid: int, span: float, settings: Settings) -> float:
    """How far the commit is from the good end toward the bad end (0: like the good end,
    1: like the bad end; log scale), compared with the good end. Clear when it is bad-like
    and differs significantly from the good end, or plainly good-like (under 0.35)."""

    def clear(pair: Pair) -> bool:
        fraction = log_change(pair.change) / span
        return (fraction >= 0.5 and pair.p_value < settings.alpha) or fraction < 0.35

    return log_change(compare(lab, 0, mid, settings, clear).change) / span
