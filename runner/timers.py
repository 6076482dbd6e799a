"""Timing one call: CUDA events with L2 flushes on GPU, adaptive timing on CPU (imports torch).

Both run a first call (compilation happens there), then warm-up calls for at least
`warmup_s`, then `samples` timed samples; every sample is kept.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from runner.timing import Timing, TimingSettings

MIN_WARMUP_CALLS = 3
MAX_CALLS_PER_SAMPLE = 1_000_000
# Writing this much more than the L2 size evicts everything a previous call left there.
L2_FLUSH_FACTOR = 2
MIN_FLUSH_BYTES = 256 * 2**20


def measure(fn: Callable[[], object], device: str, settings: TimingSettings) -> Timing:
    if device == "cuda":
        return time_cuda(fn, settings)
    with cpu_threads(settings.threads):
        return time_cpu(fn, settings)


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
    """Time blocks of calls, each long enough (`min_sample_s`) for the clock to be precise.

    Warm-up runs blocks too, growing them until one lasts `min_sample_s`, so calibration
    costs no extra time.
    """
    fn()

    def block(number: int) -> float:
        begin = clock()
        for _ in range(number):
            fn()
        return clock() - begin

    number, calls, spent = 1, 0, 0.0
    while True:
        elapsed = block(number)
        calls, spent = calls + number, spent + elapsed
        if elapsed < settings.min_sample_s and number < MAX_CALLS_PER_SAMPLE:
            # Aim 20% past the target, at most 10x per step in case the estimate is off.
            wanted = settings.min_sample_s / max(elapsed, 1e-9) * 1.2
            number = min(MAX_CALLS_PER_SAMPLE, number * min(10, math.ceil(wanted)))
        elif spent >= settings.warmup_s and calls >= MIN_WARMUP_CALLS:
            break
    samples = tuple(block(number) / number * 1000 for _ in range(settings.samples))
    return Timing(samples, number)


def time_cuda(fn: Callable[[], object], settings: TimingSettings) -> Timing:
    """One call per sample between CUDA events, L2 flushed before each; one sync at the end.

    A sample includes any wait for the CPU to launch the kernels, as eager inference does.
    """
    fn()
    torch.cuda.synchronize()
    calls, start = 0, time.perf_counter()
    while calls < MIN_WARMUP_CALLS or time.perf_counter() - start < settings.warmup_s:
        fn()
        calls += 1
        if calls % 16 == 0:  # the clock only means something once the GPU has caught up
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    flush = _flush_buffer() if settings.flush_l2 else None
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(settings.samples)
    ]
    for begin, end in events:
        if flush is not None:
            flush.zero_()
        begin.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    del flush  # freed before the caller measures peak memory
    return Timing(tuple(begin.elapsed_time(end) for begin, end in events))


def _flush_buffer() -> torch.Tensor:
    l2_bytes = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    size = max(L2_FLUSH_FACTOR * l2_bytes, MIN_FLUSH_BYTES)
    return torch.empty(size, dtype=torch.int8, device="cuda")
