"""Timing calls: blocks of calls on CPU, blocks timed on the GPU on CUDA (imports torch).

A lone timing (`measure`) runs a first call (compilation happens there), warm-up calls for at
least `warmup_s`, then `samples` timed samples. A speedup (`measure_pair`) warms both sides
the same way, then times them in interleaved blocks until its confidence interval is narrow
enough (runner.engine.paired). Every sample is kept. CUDA timing, its warm-up included, is
runner.engine.gpu_blocks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

import torch

from runner.engine.gpu_blocks import GpuBackend, TorchCuda, pair_gpu, time_gpu
from runner.engine.paired import PairedTiming, sample_pairs
from runner.engine.timing_data import Timing, TimingSettings, grown_calls

MIN_WARMUP_CALLS = 3
CPU_BLOCKS = "cpu_blocks"  # the method a CPU speedup states: blocks timed by a host clock
MAX_CALLS_PER_SAMPLE = 1_000_000


def measure(fn: Callable[[], object], device: str, settings: TimingSettings) -> Timing:
    """A lone timing: `samples` samples of one call."""
    if device == "cuda":
        return time_cuda(fn, settings)
    with cpu_threads(settings.threads):
        return time_cpu(fn, settings)


def measure_pair(baseline: Callable[[], object], candidate: Callable[[], object], device: str,
                 settings: TimingSettings) -> PairedTiming:
    """The candidate's speedup over the baseline, timed in interleaved blocks."""
    if device == "cuda":
        return pair_cuda(baseline, candidate, settings)
    with cpu_threads(settings.threads):
        return pair_cpu(baseline, candidate, settings)


@contextmanager
def cpu_threads(count: int) -> Iterator[None]:
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def time_cpu(
    fn: Callable[[], object],
    settings: TimingSettings,
    clock: Callable[[], float] = time.perf_counter,
) -> Timing:
    """Time blocks of calls, each long enough (`min_sample_s`) for the clock to be precise."""
    fn()
    number = _calibrate(fn, settings, clock)
    samples = tuple(_block(fn, number, clock) for _ in range(settings.samples))
    return Timing(samples, number, CPU_BLOCKS)


def pair_cpu(
    baseline: Callable[[], object],
    candidate: Callable[[], object],
    settings: TimingSettings,
    clock: Callable[[], float] | None = None,
) -> PairedTiming:
    """Both sides in alternating blocks of `min_sample_s` (runner.engine.paired).

    With one torch thread the blocks are timed in the thread's CPU time: time the scheduler
    gave to other processes is not the layer's, and on a busy machine it is most of the
    noise. With more threads (whose work the calling thread's clock does not see) and under
    a test's fake `clock`, blocks are timed by `clock`, else the wall clock. The time budget
    is always wall time.
    """
    block_clock = clock or (time.thread_time if settings.threads == 1 else time.perf_counter)
    baseline()
    candidate()
    calls = (_calibrate(baseline, settings, block_clock),
             _calibrate(candidate, settings, block_clock))
    paired = sample_pairs(lambda: _block(baseline, calls[0], block_clock),
                          lambda: _block(candidate, calls[1], block_clock), settings, calls,
                          clock or time.perf_counter)
    return replace(paired, method=CPU_BLOCKS)


def _block(fn: Callable[[], object], number: int, clock: Callable[[], float]) -> float:
    """Milliseconds per call over `number` calls."""
    begin = clock()
    for _ in range(number):
        fn()
    return (clock() - begin) / number * 1000


def _calibrate(fn: Callable[[], object], settings: TimingSettings,
               clock: Callable[[], float]) -> int:
    """Warm up in blocks, growing them until one lasts `min_sample_s`; the calls per block.

    Calibration is the warm-up, so it costs no extra time.
    """
    number, calls, spent = 1, 0, 0.0
    while True:
        elapsed = _block(fn, number, clock) * number / 1000
        calls, spent = calls + number, spent + elapsed
        if elapsed < settings.min_sample_s and number < MAX_CALLS_PER_SAMPLE:
            number = grown_calls(number, elapsed, settings.min_sample_s, MAX_CALLS_PER_SAMPLE)
        elif spent >= settings.warmup_s and calls >= MIN_WARMUP_CALLS:
            return number


def time_cuda(fn: Callable[[], object], settings: TimingSettings,
              gpu: GpuBackend | None = None) -> Timing:
    """`samples` blocks timed on the GPU, without the host's launch cost
    (runner.engine.gpu_blocks)."""
    return time_gpu(fn, settings, gpu or TorchCuda())


def pair_cuda(baseline: Callable[[], object], candidate: Callable[[], object],
              settings: TimingSettings, gpu: GpuBackend | None = None) -> PairedTiming:
    """Both sides in alternating blocks timed on the GPU (runner.engine.gpu_blocks); the
    flush buffer and any CUDA graphs are freed on return, before the caller measures peak
    memory."""
    return pair_gpu(baseline, candidate, settings, gpu or TorchCuda())
