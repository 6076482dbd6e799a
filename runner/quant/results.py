"""What a cell produced: timings, derived metrics, or why it was skipped or failed."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from runner.engine.build_spread import BuildSpread
from runner.engine.machine_state import clocks_moved
from runner.engine.paired import PairedTiming
from runner.engine.timing_data import Timing, TimingSettings
from runner.quant.cells import QuantCell


@dataclass
class CellResult:
    cell: QuantCell
    status: str  # runner.contract.status: OK, SKIPPED or FAILED
    reason: str | None = None  # why it was skipped, or the error that failed it
    traceback: str | None = None  # of the error that failed it (kept out of the records)
    eager: PairedTiming | None = None  # baseline and quantized model, eager, interleaved
    compiled: PairedTiming | None = None  # the same, both compiled (when the cell compiles)
    # Every compiled build (a fresh compile of both sides each) when more than one was
    # planned (TimingSettings.builds); `compiled` is the first, whose times are recorded.
    builds: list[PairedTiming] = field(default_factory=list)
    # The same for an eager headline (a cell that does not compile): every eager build,
    # `eager` the first.
    eager_builds: list[PairedTiming] = field(default_factory=list)
    builds_planned: int = 0  # of the headline speedup (0: one, as in results of older runs)
    sqnr_db: float | None = None  # quantized output against the high-precision output
    peak_memory_mb: float | None = None  # CUDA: peak allocated during a quantized forward
    flops: int | None = None  # of one forward pass
    quantized_bytes: int | None = None  # least traffic of a quantized forward: in, weights, out
    # Why the numbers make no sense (far slower than bf16, an impossible SQNR), and what the
    # quantized model spent its time in then: [{name, total_ms, calls}], the top first
    suspect: str | None = None
    top_kernels: list[dict[str, Any]] = field(default_factory=list)
    # CUDA: machine_state.gpu_clocks when the timing started and ended ("start", "end")
    gpu_state: dict[str, dict[str, Any]] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)  # kind -> file path
    notes: list[str] = field(default_factory=list)
    settings: TimingSettings | None = None
    measured_s: float = 0.0  # time inside timed calls made for this cell
    compile_s: float = 0.0  # time in the first calls of compiled models (their compiles)
    autotune_s: float = 0.0  # the part of compile_s that Triton's autotuning took
    load_avg: dict[str, list[float] | None] = field(default_factory=dict)  # at start, end
    wall_s: float = 0.0

    @property
    def paired(self) -> PairedTiming | None:
        """The headline measurement: compiled when the cell compiles, else eager."""
        return self.compiled if self.cell.compile_mode else self.eager

    @property
    def compiled_combined(self) -> PairedTiming | BuildSpread | None:
        """The compiled speedup: its builds combined when more than one was planned."""
        return self._spread(self.builds) if self.builds else self.compiled

    @property
    def eager_combined(self) -> PairedTiming | BuildSpread | None:
        """The eager speedup: its builds combined when more than one was planned."""
        return self._spread(self.eager_builds) if self.eager_builds else self.eager

    def _spread(self, builds: list[PairedTiming]) -> BuildSpread:
        """Only the headline has builds: `builds_planned` is its."""
        settings = self.settings or TimingSettings()
        return BuildSpread(tuple(builds), settings.resolution, self.builds_planned)

    @property
    def headline(self) -> PairedTiming | BuildSpread | None:
        """The headline speedup's measurement (speedup, ci, pairs, unstable)."""
        return self.compiled_combined if self.cell.compile_mode else self.eager_combined

    @property
    def baseline_eager(self) -> Timing | None:
        return self.eager.baseline if self.eager else None

    @property
    def quantized_eager(self) -> Timing | None:
        return self.eager.candidate if self.eager else None

    @property
    def baseline_compiled(self) -> Timing | None:
        return self.compiled.baseline if self.compiled else None

    @property
    def quantized_compiled(self) -> Timing | None:
        return self.compiled.candidate if self.compiled else None

    @property
    def baseline(self) -> Timing | None:
        return self.paired.baseline if self.paired else None

    @property
    def quantized(self) -> Timing | None:
        return self.paired.candidate if self.paired else None

    @property
    def eager_speedup(self) -> float | None:
        """The median of the interleaved pairs' ratios (runner.engine.paired), of every
        build."""
        combined = self.eager_combined
        return combined.speedup if combined else None

    @property
    def compiled_speedup(self) -> float | None:
        combined = self.compiled_combined
        return combined.speedup if combined else None

    @property
    def speedup(self) -> float | None:
        return self.headline.speedup if self.headline else None

    @property
    def unstable(self) -> bool:
        """The headline speedup's interval stayed wider than its target, or its builds
        disagreed."""
        return self.headline is not None and self.headline.unstable

    @property
    def clocks_moved(self) -> str | None:
        """Why the GPU's clocks did not hold over the cell; None when they did (or CPU)."""
        if {"start", "end"} - self.gpu_state.keys():
            return None
        return clocks_moved(self.gpu_state["start"], self.gpu_state["end"])

    @property
    def tflops(self) -> float | None:
        if self.quantized is None or not self.flops:
            return None
        return self.flops / (self.quantized.median_ms / 1000) / 1e12

    @property
    def gbps(self) -> float | None:
        if self.quantized is None or not self.quantized_bytes:
            return None
        return self.quantized_bytes / (self.quantized.median_ms / 1000) / 1e9

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["cell"] = self.cell.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CellResult:
        values = dict(data)
        values["cell"] = QuantCell.from_dict(values["cell"])
        if values.get("settings") is not None:
            values["settings"] = TimingSettings.from_dict(values["settings"])
        for key in ("eager", "compiled"):
            if values.get(key) is not None:
                values[key] = PairedTiming.from_dict(values[key])
        for key in ("builds", "eager_builds"):
            values[key] = [PairedTiming.from_dict(build) for build in values.get(key, [])]
        return cls(**values)
