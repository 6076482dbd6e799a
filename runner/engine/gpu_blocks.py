"""Timing CUDA calls by the GPU's time, not the host's.

A small kernel (10-30 us on an H100) runs faster than Python launches it (dynamo guards, the
inductor wrapper, tensor-subclass dispatch cost tens of us), so events around one call time
the host, which moves with CPU load. Here a block of calls waits behind a spin kernel sized
to outlast the host's enqueueing of the block: when the GPU reaches the block's first event,
the whole block is queued, and the events see GPU time only (nvbench does the same). A block
is timed one of three ways (TimingSettings.gpu_method):

- cuda_graph: each call captured once in a CUDA graph and replayed. A replay costs the host
  little, so the spin stays short. Where either side cannot be captured (a host sync, a CPU
  branch on a tensor's value), both are timed as plain calls, and the timing says why.
- batched: N plain calls back to back between two events (L2 warm).
- per_call: plain calls, each between its own events.

With TimingSettings.flush_l2 (the default), cuda_graph and per_call time each call between
its own events after a read that evicts L2 (nvbench's "cold" measurement), and a block
reads their mean: a weight that fits L2 (a 32 MiB bf16 4096x4096 on a 50 MB H100 L2) is
read from memory as in a model of many layers, not from whatever part of it the last call
left in L2, which depends on where the weight lies (warm, the A/A cells of that shape read
0.988 to 1.013 from process to process on an H100, perf/gpu_check.py). Without it, calls
run back to back (L2 warm), N replays between two events for cuda_graph. N is raised until
a block lasts TimingSettings.min_gpu_block_s of GPU time. Warm-up runs blocks until the
last few agree (an idle GPU clocks far below its boost clock) or a cap is reached, and says
which. Speedups pair the sides in ABBA blocks as on CPU (runner.engine.paired).

A side given as a Rotation (TimingSettings.rotate_weights; its copies made by the family,
which knows the model) is captured as one graph of a call on each copy, and its blocks are
replays back to back between two events: each call meets its own weights cold, as a layer
of a large model does, with no evicting read and no events between calls (l2 "rotated").
On an H200 those added ~2.5 us to a 14 us decode call: 0.0165 ms a call between events,
0.0140 ms over 8 rotated weight copies (perf/gpu_cost_probe.py).

Everything CUDA goes through a GpuBackend: TorchCuda here, a fake GPU in the tests. Plain
Python: torch is imported when a TorchCuda is made.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from runner.engine.paired import PairedTiming, sample_pairs
from runner.engine.timing_data import (
    BATCHED,
    CUDA_GRAPH,
    PER_CALL,
    Timing,
    TimingSettings,
    grown_calls,
)

WARM, FLUSHED, ROTATED = "warm", "flushed", "rotated"
MAX_BLOCK_CALLS = 100_000
# A block timing each call alone also flushes L2 before each call (more GPU time than a
# small call): fewer calls.
MAX_PER_CALL_BLOCK = 50
# Warm-up is steady once the last STEADY_BLOCKS blocks agree within STEADY_TOLERANCE; it
# stops unsteady after MAX_WARMUP_S (or `warmup_s` when longer) or MAX_WARMUP_BLOCKS.
STEADY_BLOCKS = 3
STEADY_TOLERANCE = 0.02
MAX_WARMUP_S = 1.0
MAX_WARMUP_BLOCKS = 200
# The spin lasts SPIN_MARGIN times the host's usual enqueue time of a block (the median of
# the last SPIN_HISTORY blocks, per call) plus SPIN_FLOOR_S, at most MAX_SPIN_S.
SPIN_MARGIN = 2.0
SPIN_FLOOR_S = 50e-6
MAX_SPIN_S = 0.05
SPIN_HISTORY = 8
# The spin kernel counts SM cycles; sized at a clock above any current GPU's boost clock, it
# lasts at least as long as asked.
SPIN_CLOCK_HZ = 2.5e9
# Reading this much more than the L2 size evicts everything a previous call left there.
L2_FLUSH_FACTOR = 2
MIN_FLUSH_BYTES = 256 * 2**20
CAPTURE_WARMUP_CALLS = 3  # on a side stream before capture, as PyTorch's docs ask
MAX_REASON_CHARS = 300

Call = Callable[[], object]


@dataclass(frozen=True)
class Rotation:
    """One side's call on each of several copies of its model, each copy reading its own
    weights. Called, it is the first copy's call: a timer that does not rotate (no CUDA
    graph, L2 kept warm) times that one."""

    calls: tuple[Call, ...]

    def __call__(self) -> object:
        return self.calls[0]()

    def all(self) -> None:
        for call in self.calls:
            call()


class Event(Protocol):
    def record(self) -> None: ...


class GpuBackend(Protocol):
    """What the timers ask of a GPU."""

    def host_time(self) -> float:
        """The host's clock, seconds."""

    def synchronize(self) -> None: ...

    def event(self) -> Event:
        """A timing event, recorded on the current stream."""

    def elapsed_ms(self, start: Event, end: Event) -> float:
        """GPU time between two recorded events, after a synchronize."""

    def spin(self, seconds: float) -> None:
        """Enqueue a kernel that keeps the GPU busy for at least `seconds`."""

    def flush_l2(self) -> None:
        """Enqueue what evicts L2."""

    def capture(self, fn: Call) -> tuple[Call | None, str]:
        """A replay of `fn` captured in a CUDA graph; None and why where it cannot be."""


class TorchCuda:
    """GpuBackend over torch.cuda, on the current device and stream."""

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self._flush: Any = None  # the flush buffer, made on first use

    def host_time(self) -> float:
        return time.perf_counter()

    def synchronize(self) -> None:
        self.torch.cuda.synchronize()

    def event(self) -> Any:
        return self.torch.cuda.Event(enable_timing=True)

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return start.elapsed_time(end)

    def spin(self, seconds: float) -> None:
        self.torch.cuda._sleep(max(1, int(seconds * SPIN_CLOCK_HZ)))

    def flush_l2(self) -> None:
        """Read a buffer larger than L2: the call then finds L2 holding this buffer, clean.
        A write (Triton's do_bench and nvbench zero one) leaves L2 dirty, and the call pays
        for writing it back: on an H100 a 32 MiB bf16 weight read at 2.2x its HBM time
        after a zero_() (perf/gpu_check.py)."""
        if self._flush is None:
            cuda = self.torch.cuda
            l2_bytes = cuda.get_device_properties(cuda.current_device()).L2_cache_size
            size = max(L2_FLUSH_FACTOR * l2_bytes, MIN_FLUSH_BYTES)
            self._flush = self.torch.zeros(size // 8, dtype=self.torch.int64, device="cuda")
        self._flush.sum()

    def capture(self, fn: Call) -> tuple[Call | None, str]:
        cuda = self.torch.cuda
        try:
            side = cuda.Stream()
            side.wait_stream(cuda.current_stream())
            with cuda.stream(side):
                for _ in range(CAPTURE_WARMUP_CALLS):
                    fn()
            cuda.current_stream().wait_stream(side)
            graph = cuda.CUDAGraph()
            with cuda.graph(graph):
                fn()
        except Exception as error:  # whatever the call does that capture forbids
            cuda.synchronize()
            return None, f"{type(error).__name__}: {error}"[:MAX_REASON_CHARS]
        return graph.replay, ""


class Blocks:
    """One side's blocks: a spin kernel, then `calls` calls timed by events; calling it runs
    one block and gives the milliseconds per call. `copies` (a Rotation's): each call is a
    replay of its graph, a call on each copy back to back, never timed alone."""

    def __init__(self, gpu: GpuBackend, call: Call, method: str, flush_l2: bool,
                 copies: int | None = None):
        self.gpu, self.call, self.method, self.flush_l2 = gpu, call, method, flush_l2
        self.copies = copies or 1
        self.each_call = copies is None and times_each_call(method, flush_l2)
        self.calls = 1
        self.enqueue_s: deque[float] = deque(maxlen=SPIN_HISTORY)  # host time per call
        self.outran = 0  # blocks whose enqueueing outlasted their spin kernel

    @property
    def spin_s(self) -> float:
        usual = statistics.median(self.enqueue_s) if self.enqueue_s else 0.0
        return min(MAX_SPIN_S, SPIN_FLOOR_S + SPIN_MARGIN * usual * self.calls)

    def __call__(self) -> float:
        spin_s = self.spin_s
        begin = self.gpu.host_time()
        self.gpu.spin(spin_s)
        spans = self._enqueue()
        enqueued_s = self.gpu.host_time() - begin
        self.gpu.synchronize()
        self.outran += enqueued_s > spin_s
        self.enqueue_s.append(enqueued_s / self.calls)
        return (sum(self.gpu.elapsed_ms(start, end) for start, end in spans)
                / (self.calls * self.copies))

    def _enqueue(self) -> list[tuple[Event, Event]]:
        if not self.each_call:
            return [self._timed(self.calls)]
        spans = []
        for _ in range(self.calls):
            if self.flush_l2:
                self.gpu.flush_l2()
            spans.append(self._timed(1))
        return spans

    def _timed(self, calls: int) -> tuple[Event, Event]:
        start, end = self.gpu.event(), self.gpu.event()
        start.record()
        for _ in range(calls):
            self.call()
        end.record()
        return start, end

    def grow(self, ms: float, least_s: float) -> bool:
        """More calls per block when this block (`ms` per call) lasted less than `least_s`;
        whether there are."""
        block_s = ms * self.calls * self.copies / 1000
        most = MAX_PER_CALL_BLOCK if self.each_call else MAX_BLOCK_CALLS
        if block_s >= least_s or self.calls >= most:
            return False
        self.calls = grown_calls(self.calls, block_s, least_s, most)
        return True


@dataclass(frozen=True)
class Warmup:
    steady: bool  # the last STEADY_BLOCKS blocks agreed before the cap
    blocks: int
    seconds: float


def warm_up(blocks: Blocks, settings: TimingSettings) -> Warmup:
    """Blocks, grown until one lasts `min_gpu_block_s`, until the last STEADY_BLOCKS of the
    final size agree and `warmup_s` has passed, or the cap; this calibrates the block too."""
    gpu = blocks.gpu
    begin = gpu.host_time()
    cap_s = max(MAX_WARMUP_S, settings.warmup_s)
    recent: list[float] = []
    count = 0
    while True:
        ms = blocks()
        count += 1
        spent = gpu.host_time() - begin
        grown = blocks.grow(ms, settings.min_gpu_block_s)
        recent = [] if grown else [*recent, ms][-STEADY_BLOCKS:]
        steady = spent >= settings.warmup_s and _agree(recent)
        if steady or spent >= cap_s or count >= MAX_WARMUP_BLOCKS:
            blocks.outran = 0  # warm-up blocks are not measurements
            return Warmup(steady, count, spent)


def _agree(times: list[float]) -> bool:
    return len(times) == STEADY_BLOCKS and max(times) - min(times) <= STEADY_TOLERANCE * min(times)


def times_each_call(method: str, flush_l2: bool) -> bool:
    """Whether each call is timed alone (per_call always; cuda_graph when L2 is flushed)."""
    return method == PER_CALL or (method == CUDA_GRAPH and flush_l2)


def l2_policy(method: str, flush_l2: bool, rotated: bool = False) -> str:
    if rotated:
        return ROTATED
    return FLUSHED if flush_l2 and times_each_call(method, flush_l2) else WARM


def pair_gpu(baseline: Call, candidate: Call, settings: TimingSettings,
             gpu: GpuBackend) -> PairedTiming:
    """The candidate's speedup over the baseline in alternating blocks timed on the GPU."""
    calls, copies, method, note = _prepare(gpu, (baseline, candidate), settings)
    sides = [Blocks(gpu, call, method, settings.flush_l2, count)
             for call, count in zip(calls, copies or (None, None), strict=True)]
    notes = [note, _rotation_note(copies)] + [
        _warmup_note(name, warm_up(side, settings))
        for name, side in zip(("baseline", "candidate"), sides, strict=True)]
    paired = sample_pairs(sides[0], sides[1], settings, (sides[0].calls, sides[1].calls),
                          gpu.host_time)
    notes.append(_outran_note(sum(side.outran for side in sides)))
    return replace(paired, method=method,
                   l2=l2_policy(method, settings.flush_l2, rotated=copies is not None),
                   method_note="; ".join(text for text in notes if text))


def time_gpu(fn: Call, settings: TimingSettings, gpu: GpuBackend) -> Timing:
    """A lone timing: `samples` blocks of one call, each timed on the GPU."""
    calls, copies, method, note = _prepare(gpu, (fn,), settings)
    blocks = Blocks(gpu, calls[0], method, settings.flush_l2, copies and copies[0])
    warmup_note = _warmup_note("the call", warm_up(blocks, settings))
    samples = tuple(blocks() for _ in range(settings.samples))
    notes = (note, _rotation_note(copies), warmup_note, _outran_note(blocks.outran))
    return Timing(samples, blocks.calls, method,
                  l2_policy(method, settings.flush_l2, rotated=copies is not None),
                  "; ".join(text for text in notes if text))


def _prepare(gpu: GpuBackend, fns: Sequence[Call], settings: TimingSettings
             ) -> tuple[list[Call], list[int] | None, str, str]:
    """The calls to time after a first call of each (compilation happens there): CUDA graph
    replays when asked for and every side captures, else the calls; the copies each side's
    replay calls, when every side is a Rotation and L2 is cold (captured as one graph of a
    call on each copy; else None); the method they are timed by, and why it is not the one
    asked for. Plain calls instead of replays keep the L2 policy: per_call when L2 is
    flushed, batched when warm; a Rotation is then its first copy's call."""
    method = settings.gpu_method
    rotating = settings.flush_l2 and all(isinstance(fn, Rotation) for fn in fns)
    captured = [fn.all if rotating else fn for fn in fns]
    for fn in captured:
        fn()
    gpu.synchronize()
    if method != CUDA_GRAPH:
        return list(fns), None, method, ""
    replays = []
    for fn in captured:
        replay, reason = gpu.capture(fn)
        if replay is None:
            instead = PER_CALL if settings.flush_l2 else BATCHED
            words = "calls each timed alone" if settings.flush_l2 else "batched calls"
            return list(fns), None, instead, f"no CUDA graph ({reason}): {words} instead"
        replays.append(replay)
    return replays, [len(fn.calls) for fn in fns] if rotating else None, CUDA_GRAPH, ""


def _rotation_note(copies: list[int] | None) -> str:
    if copies is None:
        return ""
    return f"weights rotated over {'/'.join(map(str, copies))} copies, each call's own, cold"


def _warmup_note(what: str, warmup: Warmup) -> str:
    if warmup.steady:
        return ""
    return (f"warm-up of {what} not steady after {warmup.blocks} blocks "
            f"({warmup.seconds:.2f} s)")


def _outran_note(count: int) -> str:
    if not count:
        return ""
    return f"{count} blocks may include host time (enqueueing outlasted the spin kernel)"
