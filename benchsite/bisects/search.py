"""The bisection itself, apart from where measurements come from (`Lab`) and are kept.

Positions 0..n are the commits from the good end (0) to the bad end (n). Every comparison of
two commits is interleaved on this worker: rounds of the two alternate (ABBA: a then b, then
b then a...), and the comparison uses its own rounds only, so the machine's drift between
comparisons cancels. A burst of other load can still land on one side of one pair of rounds,
so a comparison's change is the median over its pairs of rounds of each pair's ratio (a
round counts as the median of its repetitions). It differs only where its repetitions do (a
two-sided Mann-Whitney U test, as the compare API), its pairs of rounds do (`rounds_p`, with
two pairs or more: Student's t over the pairs' log ratios, less those a burst moved, more
than half of log `burst` from their median, one in four from each end at most; the
comparison's p is the larger of the two) and its pairs agree on the sign (one pair in four
may not). The pairs' test is there because a real machine's rounds differ from each other by
more than their repetitions do: the repetitions of one round are not independent, and the
Mann-Whitney over all of them alone was overconfident (with rounds whose level varies by 10
%, `perf/bisection_bursts.py --jitter 0.10` named a wrong culprit in up to 5 of 40 seeds,
and culprits in a range with no change). The pairs are the unit of independent evidence;
where rounds do not vary they agree closely, and the test costs a few rounds. With one pair
there is no spread to judge: the repetitions alone, and the search takes one pair's verdict
only beyond a burst's reach. A comparison adds pairs of rounds in steps (1, 2, 4, then
`max_rounds`) until its verdict is clear, as Pinpoint does; a verdict a burst could have
made (within `burst`, 2x, of its boundary) needs `same_rounds` pairs at least.

1. Both ends first, twice with fresh rounds (a third time where the two disagree): unless
   the bad end is worse than the good one (differing, and by at least `min_change`, the
   change looked for) in two of them, the outcome is "not reproduced". A comparison of the
   ends adds pairs of rounds while it is unclear: it stops early only where it reproduces
   the change or shows there is none of that size (the upper confidence bound of its
   change the regression's way, Student's t over its pairs' log ratios at 1 - `alpha`, is
   below `min_change`); one pair of rounds near no change, or a significant change smaller
   than the one looked for, is unclear. A first comparison that shows none, or that
   reaches the cap of `max_rounds` pairs with its change below `min_change`, needs no
   second look. Where none shows there is no change and the last reaches the cap with a
   change of `min_change` or more that is not significant, the outcome is "ambiguous" (the
   whole range its candidate): the ends neither reproduce the change nor rule it out.
   The range's change, which commits are placed against, is the middle of all the ends'
   comparisons' pairs of rounds (`pooled`).
2. Binary search. Each commit is compared with both ends and placed between them (0: like
   the good end, 1: like the bad end, log scale); it is bad-like when both comparisons put
   it at least halfway (the good end's alone where it is more than a burst from halfway).
   Where they disagree it is measured again with fresh rounds (`remeasures` times at most;
   then their mean decides). A commit that fails to build or run is skipped (`git bisect
   skip`): the nearest untested commit is measured instead.
3. The last good-like and first bad-like commits are compared with each other with fresh
   rounds: a culprit when they differ in the regression's direction by at least half the
   original change (in log scale, as the halfway point); where p is not well below alpha,
   compared once more and judged on both comparisons' pairs of rounds. A final pair that
   does not (a burst can make a bad commit look good) sends both back to be placed again
   with fresh rounds, and the search goes on from what they are then; only when they hold
   is the outcome "ambiguous", listing the measured steps that carry part of the change;
   with skipped commits between them, "ambiguous" names that range and says which were
   skipped.

A wrong culprit is worse than "ambiguous": every rule above errs toward the latter.
Deterministic given the measurements, so a bisect whose worker died replays what was stored
and measures only what is missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import fmean, median, stdev
from typing import Protocol

from scipy import stats

from benchsite.comparison.judge import MIN_REPETITIONS

CULPRIT, NOT_REPRODUCED, AMBIGUOUS, FAILED = "culprit", "not_reproduced", "ambiguous", "failed"
GOOD, BAD, SKIPPED = "good", "bad", "skipped"
CANDIDATE_SHARE = 0.25  # of the original change: a measured step that carries part of it
PLAINLY = 0.15  # a commit this far on one side of halfway is placed without a significant test
# A culprit's step, in spans of the range's change: more is a burst on its side, measured again.
MOST = 1.5
# A final pair with p at or above alpha x this is compared once more with fresh rounds and
# judged on both comparisons' pairs: one comparison at alpha names a step between two
# commits of one level (one misplaced) in about alpha of the bisects that get there.
CLEARLY = 0.1


class Skip(Exception):
    """A commit that cannot be measured (it does not build, or its run fails)."""


class Lab(Protocol):
    """Measurements by comparison: a commit's rounds for its comparison with `partner`, the
    `attempt`-th time these two are compared (each attempt has fresh rounds)."""

    def rounds(self, position: int, partner: int, attempt: int = 0) -> list[list[float]]:
        """Each round's repetitions at the commit in that comparison."""

    def measure(self, position: int, partner: int, attempt: int = 0) -> None:
        """Measure one more round at the commit for that comparison; Skip when the commit
        cannot be measured."""


@dataclass(frozen=True)
class Settings:
    alpha: float = 0.05
    max_rounds: int = 6  # pairs of rounds in one comparison, at most
    same_rounds: int = 2  # pairs of rounds before a verdict that a burst could have made
    # The most other load may slow one round (x): a verdict further than this from its
    # boundary stands on one pair of rounds, nearer needs `same_rounds` pairs.
    burst: float = 2.0
    # The relative change of the ends that reproduces a regression (the change looked for:
    # half the regression's magnitude for a regression's bisect).
    min_change: float = 0.05
    remeasures: int = 2  # fresh placements of a commit whose verdict contradicts the search


@dataclass(frozen=True)
class Pair:
    """Two commits' rounds compared: the relative change from `a` to `b` (the median of the
    pairs of rounds' ratios), the Mann-Whitney p-value of their repetitions (1 with too few),
    the p-value of the pairs of rounds' log ratios (`rounds_p`; None with one pair), and
    whether the pairs of rounds moved the same way (all of them; one in four may not, a
    burst on one side)."""

    a: int
    b: int
    change: float
    p_value: float
    rounds: int  # pairs of rounds (with values on both sides)
    ratios: tuple[float, ...] = ()  # each pair's log ratio, b over a
    tested: bool = True  # each side had MIN_REPETITIONS values for the test (else p is 1)
    p_rounds: float | None = None  # the pairs' own test; None: one pair, no spread to judge

    @property
    def p(self) -> float:
        """The comparison's p-value: the larger of the repetitions' and the pairs'."""
        return max(self.p_value, self.p_rounds or 0.0)

    @property
    def agree(self) -> bool:
        return self.split(0.0)

    def split(self, at: float) -> bool:
        """Whether the pairs' log ratios lie on one side of `at` (one in four may not)."""
        above = sum(1 for ratio in self.ratios if ratio > at)
        below = sum(1 for ratio in self.ratios if ratio < at)
        return min(above, below) <= len(self.ratios) // 4

    def differs(self, alpha: float) -> bool:
        return self.p < alpha and self.agree


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


def log_change(change: float) -> float:
    return math.log1p(change) if change > -1 else -math.inf


def judge(lab: Lab, a: int, b: int, attempt: int = 0) -> Pair:
    return paired(a, b, lab.rounds(a, b, attempt), lab.rounds(b, a, attempt))


def paired(a: int, b: int, rounds_a: list[list[float]], rounds_b: list[list[float]]) -> Pair:
    """The comparison of two commits' rounds (each round's repetitions; the n-th round of `a`
    beside the n-th of `b`, a pair). The rule every verdict of a bisect or try job uses."""
    va = [v for r in rounds_a for v in r]
    vb = [v for r in rounds_b for v in r]
    if not va or not vb:
        raise Skip(f"no values at position {a if not va else b}")
    ratios = [log_change(median(rb) / median(ra) - 1) if median(ra) > 0 else math.inf
              for ra, rb in zip(rounds_a, rounds_b, strict=False) if ra and rb]
    if not ratios:
        raise Skip(f"no pair of rounds has values at both positions {a} and {b}")
    change = _change(ratios)
    tested = min(len(va), len(vb)) >= MIN_REPETITIONS
    p = 1.0
    if tested:
        p = float(stats.mannwhitneyu(va, vb, alternative="two-sided").pvalue)
        p = 1.0 if math.isnan(p) else p
    return Pair(a, b, change, p, len(ratios), tuple(ratios), tested, rounds_p(ratios))


def rounds_p(ratios: list[float], burst: float = 2.0) -> float | None:
    """The two-sided p-value of the pairs of rounds' log ratios against no change: Student's
    t over them, less a burst's (a ratio more than half of log `burst` from their median; at
    most k // 4 from each end, the pairs the sign rule lets disagree). The pairs, not the
    repetitions, are the independent evidence where a machine's rounds differ by more than
    their repetitions do; with one pair there is no spread to judge (None: the repetitions
    alone, and the search takes one pair's verdict only beyond a burst's reach). A ratio
    that is not finite (a round's median of 0) leaves it to the repetitions, as before."""
    k = len(ratios)
    if k < 2 or not all(map(math.isfinite, ratios)):
        return None
    middle, reach = median(ratios), math.log(burst) / 2
    kept = sorted(ratios)
    for _ in range(k // 4):
        if kept[-1] - middle > reach:
            kept.pop()
        if middle - kept[0] > reach:
            kept.pop(0)
    centre, spread = fmean(kept), stdev(kept)
    if spread == 0:
        return 1.0 if centre == 0 else 0.0
    t = centre / (spread / math.sqrt(len(kept)))
    return float(2 * stats.t.sf(abs(t), len(kept) - 1))


def rule(alpha: float) -> str:
    """`paired`'s verdict in words (an A/B try job's outcome says what judged its series)."""
    return ("pairs of rounds: the change is the median over the pairs of rounds of each "
            "pair's ratio (a burst on one round moves one pair); significant where the "
            f"repetitions differ (Mann-Whitney p < {alpha:g}), the pairs' log ratios differ "
            f"from no change (with two pairs or more: Student's t, p < {alpha:g}, less a "
            "pair a 2x burst moved, one in four from each end at most; rounds vary more than "
            "their repetitions) and the pairs agree on the sign (one in four may not)")


def _middle(ratios: list[float]) -> float:
    """The median of the pairs' log ratios; of an even number, the middle one nearer 0 (the
    mean of the two middle ones moves half a burst's size when one of them is hit)."""
    ordered = sorted(ratios)
    half = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[half]
    return min(ordered[half - 1], ordered[half], key=abs)


def _change(ratios: list[float]) -> float:
    """The relative change the pairs of rounds' log ratios give: their middle."""
    middle = _middle(ratios)
    return math.expm1(middle) if math.isfinite(middle) else math.inf


def pooled(pairs: list[Pair]) -> Pair:
    """Comparisons of the same two commits as one: the change is the middle of all their
    pairs of rounds' log ratios (`_middle`). A burst or a dip of one round moves one ratio
    of many; the smallest of the comparisons' changes would follow a round that read the bad
    commit fast or the good one slow (on a real machine: the 1.5x range's ends +48 % and
    +23 %, the second with two of its four rounds of the bad end 20 % fast, so the
    culprit's own +46 % step was taken for a burst, 2x the range's change)."""
    if len(pairs) == 1:
        return pairs[0]
    ratios = tuple(ratio for pair in pairs for ratio in pair.ratios)
    return Pair(pairs[0].a, pairs[0].b, _change(list(ratios)),
                max(pair.p_value for pair in pairs), len(ratios), ratios,
                all(pair.tested for pair in pairs), rounds_p(list(ratios)))


def compare(lab: Lab, a: int, b: int, settings: Settings, clear, attempt: int = 0) -> Pair:
    """Pairs of rounds of `a` and `b` (a then b, then b then a, ...): one, then two, then
    doubling, until `clear(pair)` or `max_rounds` pairs."""
    target = 1
    while True:
        done = min(len(lab.rounds(a, b, attempt)), len(lab.rounds(b, a, attempt)))
        if done >= target and len(lab.rounds(a, b, attempt)) == len(lab.rounds(b, a, attempt)):
            pair = judge(lab, a, b, attempt)
            if clear(pair) or done >= settings.max_rounds:
                return pair
            target = min(max(2 * done, settings.same_rounds), settings.max_rounds)
            continue
        for position, partner in ((a, b), (b, a)) if done % 2 == 0 else ((b, a), (a, b)):
            if len(lab.rounds(position, partner, attempt)) == done:
                lab.measure(position, partner, attempt)


class Search:
    """One bisect of positions 0..n; `worse` is +1 when higher values are worse, -1 when
    lower ones are, 0 when unknown (then the ends' own change is the regression)."""

    def __init__(self, lab: Lab, n: int, worse: int, settings: Settings):
        self.lab, self.n, self.worse, self.settings = lab, n, worse, settings
        self.attempts: dict[tuple[int, int], int] = {}  # comparisons made of each pair
        # Each placement of a commit: where the good end and the bad end put it (fractions).
        self.placed: dict[int, list[tuple[float, float]]] = {}
        self.verdicts: dict[int, str] = {}
        self.skipped: set[int] = set()
        self.span = 0.0

    def fresh(self, a: int, b: int, clear) -> Pair:
        """A comparison of `a` and `b` with rounds of its own (the next attempt)."""
        attempt = self.attempts.get((a, b), 0)
        self.attempts[(a, b)] = attempt + 1
        return compare(self.lab, a, b, self.settings, clear, attempt)

    def run(self) -> Outcome:
        try:
            ends = self.ends()
        except Skip as skipped:
            return Outcome(FAILED, f"an end of the range could not be measured: {skipped}")
        if isinstance(ends, Outcome):
            return ends
        self.span = log_change(ends.change)
        self.verdicts.update({0: GOOD, self.n: BAD})
        self.placed.update({0: [(0.0, 0.0)], self.n: [(1.0, 1.0)]})
        base = Outcome("", "", original_change=ends.change, worse=self.observed,
                       verdicts=self.verdicts)
        while True:
            lo, hi = self.bounds()
            untested = sorted((p for p in range(lo + 1, hi) if p not in self.placed),
                              key=lambda p: (abs(p - (lo + hi) // 2), -p))
            if untested:
                self.place(untested[0])
                continue
            between = sorted(p for p in self.skipped if lo < p < hi)
            if between:
                return self.skipped_range(base, lo, hi, between)
            pair = self.fresh(lo, hi, self.final_clear(ends))
            twice = self.holds(pair) and pair.p >= self.settings.alpha * CLEARLY
            if twice:  # only just significant: more fresh rounds, judged with the first
                pair = pooled([pair, self.fresh(lo, hi, self.final_clear(ends))])
            if self.holds(pair):
                base.state, base.culprit = CULPRIT, hi
                base.magnitude, base.p_value = pair.change, pair.p
                base.message = (f"{pair.change:+.1%} from its parent (p={pair.p:.2g}, the "
                                "larger of its repetitions' and its pairs of rounds', "
                                f"confirmed with {pair.rounds} fresh interleaved round(s) "
                                f"each{' in two comparisons' if twice else ''}), of "
                                f"{ends.change:+.1%} over the range")
                return base
            again = [p for p in (lo, hi) if self.can_place(p)]
            if not again:
                return self.spread(base, pair, lo, hi, ends)
            for position in again:  # the final pair contradicts their verdicts: again
                self.place(position)

    def holds(self, pair: Pair) -> bool:
        """Whether the final pair's step is the culprit's: significant, its pairs of rounds
        past half the range's change, and not more than `MOST` of it (a burst)."""
        return (pair.differs(self.settings.alpha) and pair.split(self.span / 2)
                and 0.5 <= log_change(pair.change) / self.span <= MOST)

    def ends(self) -> Pair | Outcome:
        """The ends compared until two comparisons agree; an Outcome when they do not
        reproduce the regression."""
        alpha = self.settings.alpha

        least = log_change(self.settings.min_change)

        def beyond(pair: Pair) -> float:  # log distance past the least change that counts
            return log_change(pair.change) * self.direction(pair) - least

        def reproduces(pair: Pair) -> bool:
            return pair.differs(alpha) and beyond(pair) >= 0

        def none(pair: Pair) -> bool:  # no change of the size looked for, at 1 - alpha
            return pair.rounds >= self.settings.same_rounds and self.upper(pair) < least

        def clear(pair: Pair) -> bool:  # else more pairs of rounds, up to the cap
            return pair.rounds >= self.settings.same_rounds and (
                reproduces(pair) or none(pair))

        first = self.fresh(0, self.n, clear)
        self.observed = self.worse or (1 if first.change > 0 else -1)
        seen = [first]
        while sum(map(reproduces, seen)) < 2 and len(seen) - sum(map(reproduces, seen)) < 2:
            if len(seen) == 1 and not reproduces(first) and (
                    none(first) or first.change * self.observed < self.settings.min_change):
                break  # none, or no sign of it at the cap: no second look
            if len(seen) == 1 and reproduces(first) and beyond(first) > self.burst:
                break  # more than a burst could make: no second look needed
            seen.append(self.fresh(0, self.n, clear))
        if sum(map(reproduces, seen)) >= 2 or (len(seen) == 1 and reproduces(first)):
            return pooled(seen)
        shown = seen[-1]
        if not any(map(none, seen)) and beyond(shown) >= 0:
            # As large as the change looked for, yet not significant at the cap: the ends
            # neither reproduce it nor rule it out (rounds vary too much on this worker).
            return Outcome(AMBIGUOUS, (
                f"the bad end is {shown.change:+.1%} from the good end, as much as the "
                f"{self.settings.min_change:.0%} looked for, but not clearly (p={shown.p:.2g} "
                f"after {shown.rounds} interleaved round(s) each, the cap; {len(seen)} "
                "comparison(s)): neither reproduced nor ruled out; its rounds vary too much "
                "on this worker: a quieter worker or more rounds would decide"),
                candidates=[self.n], after={self.n: 0}, original_change=shown.change,
                p_value=shown.p, worse=self.observed)
        bound = (f"at most {math.expm1(self.upper(shown)):+.1%} "
                 f"{'worse' if self.worse else 'either way'} at {1 - alpha:.0%} confidence"
                 if none(shown) else f"unclear at the cap of {shown.rounds} pairs of rounds")
        return Outcome(NOT_REPRODUCED, (
            f"the bad end is {shown.change:+.1%} from the good end (p={shown.p:.2g}, "
            f"{shown.rounds} interleaved round(s) each"
            f"{'' if shown.agree else ', the rounds disagreeing'}, {bound}; "
            f"{sum(map(reproduces, seen))} of {len(seen)} comparison(s) worse): not worse by "
            f"{self.settings.min_change:.0%} or more at significance {alpha:g}"),
            original_change=shown.change, p_value=shown.p, worse=self.observed,
            verdicts={0: GOOD, self.n: GOOD})

    def upper(self, pair: Pair) -> float:
        """The one-sided (1 - alpha) upper confidence bound of the pair's log change the
        regression's way (either way when that is unknown): Student's t over its pairs of
        rounds' log ratios. A burst on one round widens it, so a burst cannot pass for no
        change."""
        ratios = pair.ratios
        if len(ratios) < 2 or not all(map(math.isfinite, ratios)):
            return math.inf
        mean = fmean(ratios)
        centre = mean * self.worse if self.worse else abs(mean)
        spread = stdev(ratios) / math.sqrt(len(ratios))
        return centre + float(stats.t.ppf(1 - self.settings.alpha, len(ratios) - 1)) * spread

    def direction(self, pair: Pair) -> int:
        return self.worse or (1 if pair.change > 0 else -1)

    @property
    def burst(self) -> float:
        return math.log(self.settings.burst)

    def enough(self, pair: Pair, margin: float) -> bool:
        """Whether the pair has rounds enough for a verdict `margin` (log) past its
        boundary: one pair where a burst could not have moved it across, else
        `same_rounds`."""
        return pair.rounds >= self.settings.same_rounds or margin > self.burst

    def alike(self, pair: Pair, size: float) -> bool:
        return pair.rounds >= self.settings.same_rounds and abs(pair.change) < size

    def final_clear(self, ends: Pair):
        """The final pair's verdict: at least two pairs of rounds, twice `same_rounds`
        unless the step is more than a burst past halfway."""
        alpha = self.settings.alpha

        def clear(pair: Pair) -> bool:
            if pair.rounds < 2:
                return False
            margin = abs(log_change(pair.change) - self.span / 2)
            if pair.rounds < 2 * self.settings.same_rounds and margin <= self.burst:
                return False
            return (pair.differs(alpha)
                    or self.alike(pair, abs(ends.change) * CANDIDATE_SHARE))

        return clear

    def bounds(self) -> tuple[int, int]:
        """The first bad-like commit and the last good-like one before it (a good-like
        verdict after it contradicts the search: placed again, else set aside)."""
        hi = min(p for p, verdict in self.verdicts.items() if verdict == BAD)
        lo = max(p for p, verdict in self.verdicts.items() if verdict == GOOD and p < hi)
        for late in sorted(p for p, verdict in self.verdicts.items()
                           if verdict == GOOD and p > hi):
            if self.can_place(late) or self.can_place(hi):
                self.place(late if self.can_place(late) else hi)
                return self.bounds()
        return lo, hi

    def place(self, position: int) -> None:
        """Compare the commit with both ends (fresh rounds each time) and set its verdict:
        bad-like when both put it halfway or further. Placed again until most placements
        agree on a side, within 1 + `remeasures` placements (a commit placed before is
        placed at least once more: its verdict contradicted the search)."""
        span, alpha = self.span, self.settings.alpha

        def from_good(pair: Pair) -> bool:  # good end -> commit: clear on one side
            fraction = log_change(pair.change) / span
            return (pair.split(span / 2) and self.enough(pair, abs(fraction - 0.5) * span)
                    and ((fraction >= 0.5 and pair.differs(alpha))
                         or fraction < 0.5 - PLAINLY))

        def from_bad(pair: Pair) -> bool:  # bad end -> commit
            fraction = 1 + log_change(pair.change) / span
            return (pair.split(-span / 2) and self.enough(pair, abs(fraction - 0.5) * span)
                    and ((fraction < 0.5 and pair.differs(alpha))
                         or fraction >= 0.5 + PLAINLY))

        placements = self.placed.setdefault(position, [])
        again = bool(placements)
        while again or self.majority(position) is None:
            if len(placements) >= 1 + self.settings.remeasures:
                break
            try:
                good = log_change(self.fresh(0, position, from_good).change) / span
                # Beyond a burst's reach of halfway, the bad end could not tell otherwise.
                bad = good if abs(good - 0.5) * span > self.burst else (
                    1 + log_change(self.fresh(self.n, position, from_bad).change) / span)
            except Skip:
                self.skipped.add(position)
                self.verdicts[position] = SKIPPED
                return
            placements.append((good, bad))
            again = False
        self.verdicts[position] = BAD if self.fraction(position) >= 0.5 else GOOD

    def can_place(self, position: int) -> bool:
        return (0 < position < self.n and position not in self.skipped
                and len(self.placed[position]) < 1 + self.settings.remeasures)

    def majority(self, position: int) -> str | None:
        """The side most of the commit's placements where both ends agreed put it on."""
        sides = [BAD if good >= 0.5 else GOOD for good, bad in self.placed[position]
                 if (good >= 0.5) == (bad >= 0.5)]
        for side in (GOOD, BAD):
            if 2 * sides.count(side) > len(sides):
                return side
        return None

    def fraction(self, position: int) -> float:
        """Where the commit lies from the good end (0) to the bad end (1): the mean of its
        placements on the majority's side, else of all of them."""
        side = self.majority(position)
        chosen = [(good, bad) for good, bad in self.placed[position]
                  if side is None or (good >= 0.5) == (bad >= 0.5) == (side == BAD)]
        return fmean(value for placement in chosen for value in placement)

    def skipped_range(self, base: Outcome, lo: int, hi: int, between: list[int]) -> Outcome:
        base.state, base.candidates = AMBIGUOUS, [*between, hi]
        base.after = dict.fromkeys(base.candidates, lo)
        base.message = (f"the change is in the range after position {lo} up to {hi}; "
                        f"{len(between)} commit(s) in it were skipped (they did not build or "
                        "run), so it cannot be narrowed to one commit")
        return base

    def spread(self, base: Outcome, pair: Pair, lo: int, hi: int, ends: Pair) -> Outcome:
        base.state, base.magnitude, base.p_value = AMBIGUOUS, pair.change, pair.p
        fractions = {p: self.fraction(p) for p in self.placed if p not in self.skipped}
        ordered = sorted(fractions)
        base.after = {b: a for a, b in zip(ordered, ordered[1:], strict=False)
                      if fractions[b] - fractions[a] >= CANDIDATE_SHARE} or {hi: lo}
        base.candidates = list(base.after)
        base.message = (f"no single commit carries half of the {ends.change:+.1%} change "
                        f"(the last step, {pair.change:+.1%}, p={pair.p:.2g}, measured "
                        "again with fresh rounds): it is spread over the candidates (each "
                        "somewhere after the commit measured before it)")
        return base


def bisect(lab: Lab, n: int, worse: int, settings: Settings) -> Outcome:
    """Bisect positions 0..n; `worse` is +1 when higher values are worse, -1 when lower ones
    are, 0 when unknown (then the ends' own change is the regression)."""
    return Search(lab, n, worse, settings).run()
