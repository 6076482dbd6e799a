"""What a kernel cell produced: its timing and eager's, its accuracy, or why it has none."""

from __future__ import annotations

from dataclasses import dataclass, field

from runner.engine.paired import PairedTiming
from runner.engine.timing_data import Timing, TimingSettings
from runner.kernels.spec import KernelCell

PASS, FAIL_ACCURACY = "pass", "fail_accuracy"


@dataclass
class KernelResult:
    cell: KernelCell
    status: str  # runner.contract.status: OK, SKIPPED or FAILED
    settings: TimingSettings
    reason: str = ""  # why it was skipped, or what failed it
    traceback: str = ""  # of the error that failed it
    bytes: int = 0  # least traffic of one pass (definitions)
    timing: Timing | None = None
    paired: PairedTiming | None = None  # this backend interleaved with eager (not for eager)
    accuracy: str | None = None  # PASS or FAIL_ACCURACY; None for eager and unchecked cells
    notes: list[str] = field(default_factory=list)
    measured_s: float = 0.0  # inside timed calls

    @property
    def gbps(self) -> float | None:
        if self.timing is None:
            return None
        return self.bytes / (self.timing.median_ms / 1000) / 1e9

    @property
    def eager(self) -> Timing | None:
        """Eager's timing, the baseline of the speedup, taken with this backend's."""
        return self.paired.baseline if self.paired else None

    @property
    def speedup(self) -> float | None:
        """The median of the interleaved pairs' ratios, eager's time over this one's."""
        return self.paired.speedup if self.paired else None

    @property
    def unstable(self) -> bool:
        return self.paired is not None and self.paired.unstable
