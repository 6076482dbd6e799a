"""Change detectors on plain arrays: numpy and scipy only, no Django.

Every detector is online-consistent: it walks a series in time order and a detection raised
at point T uses only points up to T, so one call on a whole history gives what running it on
each upload would have given, with `detected_at` saying when.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Detection:
    """A change found in a series of points (indices into the points given)."""

    index: int  # the first point surely at the new level (first bad)
    detected_at: int  # the newest point when the change was raised
    before: float  # level before the change (the baseline)
    after: float  # level after it
    confidence: float  # p-value (change point), or the violation count (HUD policy)
    kind: str = "change"  # HUD policy: "regression" or "suspicious"
    # The earliest point that may be the first bad one, where the points between it and
    # `index` could be at either level (None: `index`); the change is after `last_good`.
    earliest: int | None = None

    @property
    def last_good(self) -> int:
        """The last point surely at the old level (-1: none)."""
        return (self.index if self.earliest is None else self.earliest) - 1

    @property
    def magnitude(self) -> float:
        """Relative change, signed: +0.12 is 12 % up."""
        return self.after / self.before - 1.0

    @property
    def delay(self) -> int:
        """Points at the new level seen when it was raised (1: raised on the first one)."""
        return self.detected_at - self.index + 1
