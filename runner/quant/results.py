"""What a cell produced: timings, derived metrics, or why it was skipped or failed."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from runner.quant.cells import QuantCell
from runner.timing import Timing, TimingSettings


def _ratio(baseline: Timing | None, quantized: Timing | None) -> float | None:
    if baseline is None or quantized is None:
        return None
    return baseline.median_ms / quantized.median_ms


@dataclass
class CellResult:
    cell: QuantCell
    status: str  # runner.contract.status: OK, SKIPPED or FAILED
    reason: str | None = None  # why it was skipped, or the error that failed it
    traceback: str | None = None  # of the error that failed it (kept out of the records)
    baseline_eager: Timing | None = None
    quantized_eager: Timing | None = None
    baseline_compiled: Timing | None = None
    quantized_compiled: Timing | None = None
    sqnr_db: float | None = None  # quantized output against the high-precision output
    peak_memory_mb: float | None = None  # CUDA: peak allocated during a quantized forward
    flops: int | None = None  # of one forward pass
    quantized_bytes: int | None = None  # least traffic of a quantized forward: in, weights, out
    artifacts: dict[str, str] = field(default_factory=dict)  # kind -> file path
    notes: list[str] = field(default_factory=list)
    settings: TimingSettings | None = None
    measured_s: float = 0.0  # time inside timed calls made for this cell
    wall_s: float = 0.0

    @property
    def eager_speedup(self) -> float | None:
        return _ratio(self.baseline_eager, self.quantized_eager)

    @property
    def compiled_speedup(self) -> float | None:
        return _ratio(self.baseline_compiled, self.quantized_compiled)

    @property
    def baseline(self) -> Timing | None:
        """The headline baseline timing: compiled when the cell compiles, else eager."""
        return self.baseline_compiled if self.cell.compile_mode else self.baseline_eager

    @property
    def quantized(self) -> Timing | None:
        return self.quantized_compiled if self.cell.compile_mode else self.quantized_eager

    @property
    def speedup(self) -> float | None:
        return _ratio(self.baseline, self.quantized)

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
        for key in ("baseline_eager", "quantized_eager", "baseline_compiled", "quantized_compiled"):
            if values.get(key) is not None:
                values[key] = Timing.from_dict(values[key])
        return cls(**values)
