"""Timing as plain data (no torch): how carefully to time a call (TimingSettings) and the
samples a timed call gave (Timing).

Shared by the families that time calls (quantization, kernels); the timers that take the
samples, which need torch, are runner.engine.torch_timers; the command-line options that set
TimingSettings are runner.cli.timing_options.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from runner.engine.run_settings import above, at_least, one_of

UNSTABLE_SPREAD = 0.10  # interquartile range over median above which a timing is flagged
# Calibration sizes a block this much past its least time, so that a block stays above it
# when calls vary a little, growing at most MAX_GROWTH times a step in case the estimate is
# off.
CALIBRATION_AIM = 1.1
MAX_GROWTH = 10.0


def grown_calls(calls: int, block_s: float, least_s: float, most: int) -> int:
    """The calls of the next block when a block of `calls` lasted `block_s`, short of
    `least_s` (at most `most`). Scaling the calls (not a whole multiplier of them) keeps
    blocks near the target: rounding the multiplier up made blocks up to twice as long as
    asked, and a cell's pairs as much longer."""
    factor = min(MAX_GROWTH, least_s / max(block_s, 1e-9) * CALIBRATION_AIM)
    return min(most, max(calls + 1, math.ceil(calls * factor)))
# How a CUDA block is timed (runner.engine.gpu_blocks): replays of a captured CUDA graph,
# plain calls back to back, or each call between its own events.
CUDA_GRAPH, BATCHED, PER_CALL = "cuda_graph", "batched", "per_call"
GPU_METHODS = (CUDA_GRAPH, BATCHED, PER_CALL)


def method_info(method: str, l2: str, note: str) -> dict[str, Any]:
    """How a timing was taken, for a record's metric.extra_info; nothing where the timer did
    not say (records of older runs)."""
    found = {"timing_method": method, "l2": l2, "timing_note": note}
    return {key: value for key, value in found.items() if value} if method else {}


@dataclass(frozen=True)
class TimingSettings:
    """How carefully to time each call; tests and quick runs pass small values. A job's
    timing settings are checked against these fields (runner.engine.run_settings)."""

    # timed samples kept per lone measurement (a timing compared with nothing); the median
    # is reported
    samples: int = field(default=30, metadata=at_least(1))
    # warm-up calls run for at least this long (after a first call); calibrating the block
    # is part of it. 0.02 s a side read A/A speedups on CPU as well as 0.05 s did, in less
    # time per cell (perf/runner_aa.py, perf/cell_time.py). CUDA warms up until its blocks
    # agree too (runner.engine.gpu_blocks).
    warmup_s: float = field(default=0.02, metadata=at_least(0))
    # CPU: calls per sample (per block of a paired measurement) are raised until a sample
    # lasts this long. 2 ms blocks gave the A/A accuracy of 5 ms ones in a third of the time
    # on small layers; 1 ms ones did not (perf/runner_aa.py, perf/cell_time.py).
    min_sample_s: float = field(default=0.002, metadata=at_least(0))
    # CPU: torch threads while timing (torchao times with 1)
    threads: int = field(default=1, metadata=at_least(1))
    # CUDA: how blocks are timed (runner.engine.gpu_blocks): cuda_graph (falls back to
    # batched where the call cannot be captured), batched or per_call. Each block waits
    # behind a spin kernel, so the host's launch cost is out of the measurement.
    gpu_method: str = field(default=CUDA_GRAPH, metadata=one_of(GPU_METHODS))
    # CUDA: calls per block are raised until a block lasts this long on the GPU
    min_gpu_block_s: float = field(default=0.001, metadata=at_least(0))
    # CUDA cuda_graph and per_call: overwrite a buffer larger than L2 before every call and
    # time each call alone (cold L2, as a layer of a large model meets its weight). Off:
    # calls back to back (L2 warm). batched is always warm.
    flush_l2: bool = True
    # CUDA cuda_graph with flush_l2, quantization cells (the kernels family times with L2
    # flushed, and its records say so): each side timed over copies of its model instead, which
    # together hold several times L2, replayed back to back in one graph: each call reads
    # its own weights from memory, with no evicting read and no events between calls
    # (runner.engine.gpu_blocks.Rotation). Off by default until a GPU run has checked it.
    rotate_weights: bool = False
    # Paired speedups (runner.engine.paired): pairs (A B B A B A A B blocks) are added until the 95%
    # interval's half-width is at most `ci_target` of the speedup, or `budget_s` is spent
    # (at least `min_pairs`, at most `max_pairs` pairs).
    ci_target: float = field(default=0.02, metadata=above(0, "a fraction"))
    budget_s: float = field(default=2.0, metadata=at_least(0))
    min_pairs: int = field(default=8, metadata=at_least(1))
    max_pairs: int = field(default=400, metadata=at_least(1))
    # Headline speedups: independent builds (both models and the input made again in new
    # memory, and compiled afresh where the cell compiles), each measured in its own pairs
    # and combined so that the interval covers what changes between builds and processes
    # (runner.engine.build_spread). 0 is automatic: 2 for an eager headline, 2 for a
    # compiled one on CUDA, 1 compiled on CPU.
    builds: int = field(default=0, metadata=at_least(0))
    # The finest difference between builds that a speedup resolves: an interval combined over
    # builds is at least ±`resolution` of the speedup, and builds whose readings lie within
    # it of each other do not disagree. Two copies of one model differ by where their weights
    # lie: on an H200 (perf/gpu_check.py, 2026-11-28) A/A cells read up to 0.39 % off 1.00,
    # each build's interval ±0.05-0.3 %, and three of twelve combined intervals missed 1.00.
    resolution: float = field(default=0.005, metadata=at_least(0, "a fraction"))
    # A cell's wall time, compiles included: the timing of each speedup gets what is left,
    # and stops there, even before `min_pairs` (cheap calls still get LEAST_PAIRS). Each
    # build of the headline after the first gets as much again, from its start.
    cell_budget_s: float = field(default=60.0, metadata=above(0))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TimingSettings:
        return cls(**data)


@dataclass(frozen=True)
class Timing:
    """Every timed sample of one call, in milliseconds per call."""

    samples_ms: tuple[float, ...]
    calls_per_sample: int = 1
    # CUDA: how samples were timed, as in runner.engine.paired.PairedTiming
    method: str = ""
    l2: str = ""
    method_note: str = ""

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median: how noisy the samples were."""
        if len(self.samples_ms) < 2:
            return 0.0
        low, _, high = statistics.quantiles(self.samples_ms, n=4)
        return (high - low) / self.median_ms

    @property
    def measured_s(self) -> float:
        """Time spent inside the timed calls."""
        return sum(self.samples_ms) * self.calls_per_sample / 1000

    def instability(self, what: str) -> str | None:
        """A note for the records when the samples of `what` were noisy; None when steady."""
        if self.spread <= UNSTABLE_SPREAD:
            return None
        return f"unstable {what} timing: IQR {self.spread:.0%} of the median"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Timing:
        return cls(tuple(data["samples_ms"]), data["calls_per_sample"], data.get("method", ""),
                   data.get("l2", ""), data.get("method_note", ""))
