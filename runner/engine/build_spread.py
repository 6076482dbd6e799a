"""A speedup measured in independent builds (a fresh compile of both models each), combined
so that its interval covers what changes between builds. Plain Python (no torch).

An interval from neighbouring pairs says how precisely one build was measured, not what a
recompile (other kernels, other autotuning picks) or another moment of the GPU does: on an
H100 one cell read 0.279x (95% CI 0.273-0.283) and 0.505x (0.495-0.514) minutes apart.

- The speedup is the median of every build's ratios. A record's value on the site is the
  median of its values (every pair's ratio), so this keeps one number in the record, the
  site and the report. The median of the builds' medians would weigh builds equally but
  differ from what the site shows; where the two differ much the builds disagree, and the
  interval and `unstable` are what to read.
- The interval is the hull of the builds' intervals: it holds every build's reading (and
  the pooled median, which lies between the builds' medians), and is never narrower than
  ±`resolution` of the speedup (TimingSettings.resolution): two builds of one model can both
  land on one side of the truth by where their weights lie. None when a build has none.
- `unstable` when the builds' intervals, each at least ±`resolution` wide, share no point
  (they disagree beyond their precision), a build was unstable itself, there is no
  interval, or fewer builds were measured than planned (the interval then holds no spread
  between builds: on an H200 one build of a float8 cell read 1.361x [1.354, 1.368] and two
  builds in another process 1.318x and 1.334x).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from runner.contract.metrics import number_metric
from runner.engine.paired import PairedTiming


@dataclass(frozen=True)
class BuildSpread:
    """The paired timings of a speedup's builds, in the order they ran."""

    builds: tuple[PairedTiming, ...]
    resolution: float = 0.0  # the least relative half-width of an interval
    planned: int = 0  # builds planned; 0: as many as measured

    @property
    def short(self) -> bool:
        """Fewer builds were measured than planned."""
        return len(self.builds) < self.planned

    @property
    def ratios(self) -> tuple[float, ...]:
        return tuple(ratio for build in self.builds for ratio in build.ratios)

    @property
    def pairs(self) -> int:
        return len(self.ratios)

    @property
    def speedup(self) -> float:
        return statistics.median(self.ratios)

    @property
    def ci(self) -> tuple[float, float] | None:
        """The hull of the builds' 95% intervals, at least ±resolution of the speedup; None
        when a build has none."""
        intervals = [build.ci for build in self.builds]
        if any(interval is None for interval in intervals):
            return None
        speedup = self.speedup
        return (min(speedup * (1 - self.resolution), *(low for low, _ in intervals)),
                max(speedup * (1 + self.resolution), *(high for _, high in intervals)))

    @property
    def disagree(self) -> bool:
        """Whether the builds' intervals, each at least ±resolution of its speedup, share no
        point (in one dimension, intervals that overlap pairwise share one)."""
        intervals = [self._resolved(build) for build in self.builds]
        if len(intervals) < 2 or any(interval is None for interval in intervals):
            return False
        return max(low for low, _ in intervals) > min(high for _, high in intervals)

    def _resolved(self, build: PairedTiming) -> tuple[float, float] | None:
        if build.ci is None:
            return None
        low, high = build.ci
        return (min(low, build.speedup * (1 - self.resolution)),
                max(high, build.speedup * (1 + self.resolution)))

    @property
    def unstable(self) -> bool:
        return (self.ci is None or self.disagree or self.short
                or any(b.unstable for b in self.builds))

    def disagreement(self, what: str) -> str | None:
        """A note for the records when the builds disagree beyond their intervals."""
        if not self.disagree:
            return None
        readings = " vs ".join(f"{b.speedup:.3f}x ({b.ci[0]:.3f}-{b.ci[1]:.3f})"
                               for b in self.builds if b.ci)
        return (f"{what} builds disagree: {readings}; the interval holds them all, "
                "the cell is unstable")

    def summary(self) -> dict[str, Any]:
        """What the speedup's record carries beside its ratios (metric.extra_info): the
        first build's summary (how it was timed), the combined interval and each build."""
        interval = self.ci
        stopped = dict.fromkeys(build.stopped for build in self.builds)
        return {
            **self.builds[0].summary(),
            "ci_low": interval[0] if interval else None,
            "ci_high": interval[1] if interval else None,
            "pairs": self.pairs,
            "stopped_by": "+".join(stopped),
            "unstable": self.unstable,
            "builds_disagree": self.disagree,
            "builds": [_build_summary(build) for build in self.builds],
            **({"builds_planned": self.planned} if self.short else {}),
        }


def _build_summary(build: PairedTiming) -> dict[str, Any]:
    interval = build.ci
    return {"speedup": build.speedup, "ci_low": interval[0] if interval else None,
            "ci_high": interval[1] if interval else None, "pairs": build.pairs,
            "stopped_by": build.stopped}


def spread_metric(name: str, spread: BuildSpread, **extra: Any) -> dict[str, Any]:
    """A speedup's record metric measured in builds: every build's ratios as values (their
    median is the speedup), the combined interval and each build in extra_info."""
    return number_metric(name, list(spread.ratios), "x", speedup=spread.speedup,
                         **spread.summary(), **extra)
