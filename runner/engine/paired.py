"""Paired, interleaved A/B timing: the speedup of a candidate over a baseline that holds on a
busy machine. Plain Python (no torch): the timers hand in one function per side that runs
one block of calls and says how long a call took.

Timing all of A and then all of B hands every change of the machine between the two windows
(another process starting, the clock frequency moving) to B as "speedup". Here the sides
run in alternating blocks, A B B A B A A B, and each such pair of quartets gives one ratio,
the sum of A's four blocks over B's: a drift that is linear over a quartet hits both sides
equally and cancels, and each side runs first after a switch (with caches cold from the
other side) equally often: in one quartet alone that cost falls on one side, which read
±2-3% on CPU. The speedup is the median of the ratios, with
a distribution-free 95% confidence interval from the sign test (order statistics of the
ratios; no resampling, so the same ratios always give the same interval). Quartets are
added until the interval is narrower than the target, or the time budget or the pair limit
is reached; a measurement that stopped wider than its target is unstable, and says so.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from runner.contract.metrics import number_metric
from runner.engine.timing_data import Timing, TimingSettings, method_info

CONFIDENCE = 0.95
# Sign-test intervals exist from 6 pairs on (two-sided 95%); fewer can never be stable.
LEAST_PAIRS = 6
STOPPED_CI, STOPPED_BUDGET, STOPPED_PAIRS = "ci", "budget", "max_pairs"
STOPPED_CELL_BUDGET = "cell_budget"  # the cell's wall budget ran out (TimingSettings)

Block = Callable[[], float]  # runs one block of calls; returns ms per call


@dataclass(frozen=True)
class PairedTiming:
    """Every block of both sides, in the order they ran, and the ratio of each pair."""

    baseline_ms: tuple[float, ...]  # ms per call of each baseline block (four per pair)
    candidate_ms: tuple[float, ...]
    ratios: tuple[float, ...]  # baseline over candidate time, one per A B B A B A A B pair
    baseline_calls: int = 1  # calls per block
    candidate_calls: int = 1
    target: float = 0.02  # the relative CI half-width asked for
    stopped: str = STOPPED_CI  # what ended sampling: ci, budget, max_pairs or cell_budget
    # How the timer timed a block: cpu_blocks, or on CUDA cuda_graph, batched or per_call
    # (runner.engine.gpu_blocks); empty when the timer did not say.
    method: str = ""
    l2: str = ""  # CUDA: warm (calls back to back) or flushed (before every timed call)
    method_note: str = ""  # why the method is not the one asked for, a warm-up not steady

    @property
    def pairs(self) -> int:
        return len(self.ratios)

    @property
    def speedup(self) -> float:
        return statistics.median(self.ratios)

    @property
    def ci(self) -> tuple[float, float] | None:
        """The 95% confidence interval of the median ratio; None with too few pairs."""
        return median_interval(self.ratios)

    @property
    def half_width(self) -> float:
        """Half the interval's width relative to the speedup; infinite without an interval."""
        return relative_half_width(self.ratios)

    @property
    def unstable(self) -> bool:
        return self.half_width > self.target

    def instability(self, what: str) -> str | None:
        """A note for the records when the interval stayed wider than its target."""
        if not self.unstable:
            return None
        width = "no interval" if self.ci is None else f"±{self.half_width:.1%}"
        return (f"unstable {what} speedup: 95% CI {width} after {self.pairs} pairs "
                f"(target ±{self.target:.1%}, stopped by {self.stopped})")

    @property
    def baseline(self) -> Timing:
        return Timing(self.baseline_ms, self.baseline_calls)

    @property
    def candidate(self) -> Timing:
        return Timing(self.candidate_ms, self.candidate_calls)

    @property
    def measured_s(self) -> float:
        return self.baseline.measured_s + self.candidate.measured_s

    def summary(self) -> dict[str, Any]:
        """What a speedup record carries beside its ratios (metric.extra_info)."""
        interval = self.ci
        return {
            "ci_low": interval[0] if interval else None,
            "ci_high": interval[1] if interval else None,
            "confidence": CONFIDENCE,
            "pairs": self.pairs,
            "ci_target": self.target,
            "stopped_by": self.stopped,
            "unstable": self.unstable,
            **self._method_summary(),
        }

    def _method_summary(self) -> dict[str, Any]:
        """How the blocks were timed, for timers that say (records of older runs did not)."""
        if not self.method:
            return {}
        return {**method_info(self.method, self.l2, self.method_note),
                "calls_per_block": [self.baseline_calls, self.candidate_calls]}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PairedTiming:
        values = dict(data)
        for key in ("baseline_ms", "candidate_ms", "ratios"):
            values[key] = tuple(values[key])
        return cls(**values)


def speedup_metric(name: str, paired: PairedTiming, **extra: Any) -> dict[str, Any]:
    """A speedup's record metric: every pair's ratio as values (their median is the
    speedup), the 95% interval and whether it met its target in extra_info."""
    return number_metric(name, list(paired.ratios), "x", speedup=paired.speedup,
                         **paired.summary(), **extra)


def cell_budget_note(paired: PairedTiming, what: str, settings: TimingSettings) -> str | None:
    """A note for the records when the cell's budget stopped the pairs."""
    if paired.stopped != STOPPED_CELL_BUDGET:
        return None
    least = max(settings.min_pairs, LEAST_PAIRS)
    measured = (f"measured {paired.pairs} of {least} pairs" if paired.pairs < least
                else f"stopped after {paired.pairs} pairs")
    return f"{what} speedup: {measured}: cell budget spent"


def relative_half_width(ratios: tuple[float, ...] | list[float]) -> float:
    """Half the width of the median's interval over the median; infinite without one."""
    interval = median_interval(ratios)
    if interval is None:
        return math.inf
    return (interval[1] - interval[0]) / 2 / statistics.median(ratios)


def median_interval(values: tuple[float, ...] | list[float],
                    confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Distribution-free interval of the median: the order statistics the sign test gives.

    With n values sorted, [x(k), x(n+1-k)] (1-based) covers the median with probability
    1 - 2 P(Binomial(n, 1/2) < k); k is the largest that keeps this at least `confidence`.
    """
    n = len(values)
    k = _sign_test_rank(n, (1 - confidence) / 2)
    if k == 0:
        return None
    ordered = sorted(values)
    return ordered[k - 1], ordered[n - k]


def _sign_test_rank(n: int, tail: float) -> int:
    """The largest k with P(Binomial(n, 1/2) <= k - 1) <= tail; 0 when there is none."""
    cumulative, k = 0.0, 0
    log_half_n = n * math.log(0.5)
    for i in range(n // 2 + 1):
        cumulative += math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                               + log_half_n)
        if cumulative > tail:
            break
        k = i + 1
    return k


def sample_pairs(
    baseline: Block,
    candidate: Block,
    settings: TimingSettings,
    calls: tuple[int, int] = (1, 1),
    clock: Callable[[], float] = time.perf_counter,
) -> PairedTiming:
    """Run pairs (A B B A B A A B blocks) until the interval meets `settings.ci_target`
    (after at least `min_pairs`), `budget_s` is spent, or `max_pairs` ran; `cell_budget_s`
    (what is left of the cell's) stops it after any pair, even before `min_pairs`. `calls`
    are the calls per block of each side, as the timer calibrated them. The garbage
    collector waits meanwhile (as in timeit): a collection would land in one block only."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _sample(baseline, candidate, settings, calls, clock)
    finally:
        if collecting:
            gc.enable()


def _sample(baseline: Block, candidate: Block, settings: TimingSettings,
            calls: tuple[int, int], clock: Callable[[], float]) -> PairedTiming:
    start = clock()
    a_ms: list[float] = []
    b_ms: list[float] = []
    ratios: list[float] = []
    least = max(settings.min_pairs, LEAST_PAIRS)
    stopped = STOPPED_PAIRS
    while len(ratios) < settings.max_pairs:
        a1, b1, b2, a2 = baseline(), candidate(), candidate(), baseline()
        b3, a3, a4, b4 = candidate(), baseline(), baseline(), candidate()
        a_ms += (a1, a2, a3, a4)
        b_ms += (b1, b2, b3, b4)
        ratios.append((a1 + a2 + a3 + a4) / (b1 + b2 + b3 + b4))
        enough = len(ratios) >= least
        if enough and relative_half_width(ratios) <= settings.ci_target:
            stopped = STOPPED_CI
            break
        spent = clock() - start
        if spent >= settings.cell_budget_s:  # what is left of the cell's: even before `least`
            stopped = STOPPED_CELL_BUDGET
            break
        if enough and spent >= settings.budget_s:
            stopped = STOPPED_BUDGET
            break
    return PairedTiming(tuple(a_ms), tuple(b_ms), tuple(ratios), calls[0], calls[1],
                        settings.ci_target, stopped)

