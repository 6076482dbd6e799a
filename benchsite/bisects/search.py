"""The bisection itself, apart from where measurements come from (`Lab`) and are kept.

Positions 0..n are the commits from the good end (0) to the bad end (n). Every comparison
uses every repetition measured so far (a two-sided Mann-Whitney U test, as the compare API,
with at least MIN_REPETITIONS values a side) and adds rounds, alternating between its two
commits so that drift cancels, until its verdict is clear or both have `max_rounds`:

1. Both ends first: unless the bad end is worse than the good one (significant, and by at
   least `min_change`), the outcome is "not reproduced".
2. Binary search: a commit is bad-like when its median is at least halfway (in log scale)
   from the good end's to the bad end's; clear once it differs significantly from the end
   it is not like. A commit that fails to build or run is skipped (`git bisect skip`): the
   nearest untested commit is measured instead.
3. The last good-like and first bad-like commits are compared once more: a culprit when they
   differ in the regression's direction by at least half the original change. Otherwise
   "ambiguous", listing the measured steps that carry part of the change; with skipped
   commits between them, "ambiguous" names that range and says which were skipped.

Deterministic given the measurements, so a bisect whose worker died replays what was stored
and measures only what is missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import median
from typing import Protocol

from scipy import stats

from benchsite.regressions.detect.judge import MIN_REPETITIONS

CULPRIT, NOT_REPRODUCED, AMBIGUOUS, FAILED = "culprit", "not_reproduced", "ambiguous", "failed"
GOOD, BAD, SKIPPED = "good", "bad", "skipped"
CANDIDATE_SHARE = 0.25  # of the original change: a measured step that carries part of it


class Skip(Exception):
    """A commit that cannot be measured (it does not build, or its run fails)."""


class Lab(Protocol):
    def rounds(self, position: int) -> int:
        """Rounds measured at the commit."""

    def values(self, position: int) -> list[float]:
        """Every repetition of every round at the commit."""

    def measure(self, position: int) -> None:
        """Measure one more round at the commit; Skip when it cannot be."""


@dataclass(frozen=True)
class Settings:
    alpha: float = 0.05
    max_rounds: int = 4  # per commit
    same_rounds: int = 2  # rounds a side before two commits may be judged alike
    min_change: float = 0.05  # relative change of the ends that reproduces a regression


@dataclass(frozen=True)
class Pair:
    """Two commits' repetitions compared: the relative change of the medians from `a` to
    `b`, and the Mann-Whitney p-value (1 with too few repetitions)."""

    a: int
    b: int
    change: float
    p_value: float
    rounds: tuple[int, int]


@dataclass
class Outcome:
    state: str
    message: str
    culprit: int | None = None
    candidates: list[int] = field(default_factory=list)
    magnitude: float | None = None  # the culprit pair's relative change
    p_value: float | None = None
    original_change: float | None = None
    worse: int = 0  # +1: higher values are worse, -1: lower ones
    verdicts: dict[int, str] = field(default_factory=dict)


def judge(lab: Lab, a: int, b: int) -> Pair:
    va, vb = lab.values(a), lab.values(b)
    if not va or not vb:
        raise Skip(f"no values at position {a if not va else b}")
    ma, mb = median(va), median(vb)
    change = mb / ma - 1 if ma else (math.inf if mb else 0.0)
    p = 1.0
    if min(len(va), len(vb)) >= MIN_REPETITIONS:
        p = float(stats.mannwhitneyu(va, vb, alternative="two-sided").pvalue)
        p = 1.0 if math.isnan(p) else p
    return Pair(a, b, change, p, (lab.rounds(a), lab.rounds(b)))


def compare(lab: Lab, a: int, b: int, settings: Settings, clear) -> Pair:
    """Rounds at `a` and `b`, alternating (the one with fewer first), until `clear(pair)` or
    both have max_rounds."""
    for position in (a, b):
        if lab.rounds(position) == 0:
            lab.measure(position)
    while True:
        pair = judge(lab, a, b)
        growing = [p for p in (a, b) if lab.rounds(p) < settings.max_rounds]
        if clear(pair) or not growing:
            return pair
        for position in sorted(growing, key=lab.rounds):
            lab.measure(position)


def log_change(change: float) -> float:
    return math.log1p(change) if change > -1 else -math.inf


def bisect(lab: Lab, n: int, worse: int, settings: Settings) -> Outcome:
    """Bisect positions 0..n; `worse` is +1 when higher values are worse, -1 when lower ones
    are, 0 when unknown (then the ends' own change is the regression)."""
    verdicts: dict[int, str] = {}

    def alike(pair: Pair, size: float) -> bool:
        return min(pair.rounds) >= settings.same_rounds and abs(pair.change) < size

    try:
        ends = compare(lab, 0, n, settings, lambda pair: pair.p_value < settings.alpha
                       or alike(pair, settings.min_change / 2))
    except Skip as skipped:
        return Outcome(FAILED, f"an end of the range could not be measured: {skipped}")
    observed = worse or (1 if ends.change > 0 else -1)
    if ends.p_value >= settings.alpha or ends.change * observed < settings.min_change:
        return Outcome(NOT_REPRODUCED, (
            f"the bad end is {ends.change:+.1%} from the good end (Mann-Whitney p="
            f"{ends.p_value:.2g}, rounds {ends.rounds[0]} and {ends.rounds[1]}): not worse by "
            f"{settings.min_change:.0%} or more at significance {settings.alpha:g}"),
            original_change=ends.change, p_value=ends.p_value, worse=observed,
            verdicts={0: GOOD, n: GOOD})
    verdicts.update({0: GOOD, n: BAD})
    span = log_change(ends.change)
    lo, hi, skipped = 0, n, set()
    while True:
        untested = sorted((p for p in range(lo + 1, hi) if p not in skipped),
                          key=lambda p: (abs(p - (lo + hi) // 2), -p))
        if not untested:
            break
        mid = untested[0]
        try:
            verdicts[mid] = _classify(lab, mid, n, span, settings)
        except Skip:
            skipped.add(mid)
            verdicts[mid] = SKIPPED
            continue
        lo, hi = (lo, mid) if verdicts[mid] == BAD else (mid, hi)
    base = Outcome("", "", original_change=ends.change, worse=observed, verdicts=verdicts)
    between = sorted(p for p in skipped if lo < p < hi)
    if between:
        base.state, base.candidates = AMBIGUOUS, [*between, hi]
        base.message = (f"the change is in the range after position {lo} up to {hi}; "
                        f"{len(between)} commit(s) in it were skipped (they did not build or "
                        "run), so it cannot be narrowed to one commit")
        return base
    pair = compare(lab, lo, hi, settings, lambda pair: pair.p_value < settings.alpha
                   or alike(pair, abs(ends.change) * CANDIDATE_SHARE))
    base.magnitude, base.p_value = pair.change, pair.p_value
    if pair.p_value < settings.alpha and pair.change * observed >= abs(ends.change) / 2:
        base.state, base.culprit = CULPRIT, hi
        base.message = (f"{pair.change:+.1%} from its parent (Mann-Whitney p="
                        f"{pair.p_value:.2g}), of {ends.change:+.1%} over the range")
        return base
    base.state = AMBIGUOUS
    base.candidates = _candidates(lab, verdicts, ends.change, observed) or [hi]
    base.message = (f"no single commit carries half of the {ends.change:+.1%} change (the "
                    f"last step, {pair.change:+.1%}, p={pair.p_value:.2g}): it is spread over "
                    f"the candidates")
    return base


def _classify(lab: Lab, mid: int, n: int, span: float, settings: Settings) -> str:
    """GOOD or BAD: which end the commit is like (halfway in log scale), made clear against
    the other end when the rounds allow."""

    def fraction() -> float:
        return log_change(judge(lab, 0, mid).change) / span

    if lab.rounds(mid) == 0:
        lab.measure(mid)
    other = 0 if fraction() >= 0.5 else n
    compare(lab, other, mid, settings, lambda pair: pair.p_value < settings.alpha
            and (fraction() >= 0.5) == (other == 0))
    return BAD if fraction() >= 0.5 else GOOD


def _candidates(lab: Lab, verdicts: dict[int, str], original: float, worse: int) -> list[int]:
    """The later commit of each step between measured commits (in order) that moves toward
    worse by CANDIDATE_SHARE of the original change or more."""
    measured = sorted(p for p, verdict in verdicts.items() if verdict != SKIPPED)
    found = []
    for a, b in zip(measured, measured[1:], strict=False):
        if judge(lab, a, b).change * worse >= abs(original) * CANDIDATE_SHARE:
            found.append(b)
    return found
