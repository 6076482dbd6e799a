"""CUDA timing against a fake GPU: a virtual timeline where the host pays for every launch
and the GPU runs what is queued, idling when the host falls behind (runner.engine.gpu_blocks).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable

import pytest

from runner.engine import gpu_blocks, timing_data
from runner.engine.gpu_blocks import Blocks, Rotation, pair_gpu, time_gpu, warm_up
from runner.engine.run_settings import settings_problems
from runner.engine.timing_data import (
    BATCHED,
    CUDA_GRAPH,
    PER_CALL,
    TimingSettings,
    method_info,
)

LAUNCH_S = 5e-6  # host time of a kernel launch, an event record, a graph replay
FLUSH_S = 100e-6  # GPU time of an L2 flush
GPU_S = 10e-6  # GPU time of one call of the small model
SETTINGS = TimingSettings(warmup_s=0.0, min_gpu_block_s=0.001, min_pairs=8, max_pairs=12,
                          budget_s=100)


class FakeEvent:
    def __init__(self, gpu: FakeGpu):
        self.gpu, self.at = gpu, 0.0

    def record(self) -> None:
        self.at = self.gpu.mark()


class FakeGpu:
    """Host time advances with every host-side call; a kernel starts once launched and once
    the kernels before it are done. `slowdown(blocks)` scales kernels by the blocks begun so
    far (clocks ramping up, throttling); each block begins with a spin kernel."""

    def __init__(self, capture_error: str = "",
                 slowdown: Callable[[int], float] = lambda blocks: 1.0):
        self.host = 0.0
        self.gpu_free = 0.0  # when the GPU is done with what is queued
        self.capture_error = capture_error
        self.slowdown = slowdown
        self.spins = 0
        self.l2_holds: object | None = None  # whose weights L2 holds (a model, or none)
        self.flushes = 0
        # the kernels launched in a capture, each giving its GPU time when replayed
        self.captured: list[Callable[[], float]] | None = None

    def host_time(self) -> float:
        return self.host

    def synchronize(self) -> None:
        self.host = max(self.host, self.gpu_free)

    def launch(self, gpu_s: float, host_s: float = LAUNCH_S, spin: bool = False) -> None:
        self.host += host_s
        if self.captured is not None:
            self.captured.append(lambda: gpu_s)
            return
        scale = 1.0 if spin else self.slowdown(self.spins)
        self.gpu_free = max(self.host, self.gpu_free) + gpu_s * scale

    def mark(self) -> float:
        self.host += LAUNCH_S
        self.gpu_free = max(self.host, self.gpu_free)
        return self.gpu_free

    def event(self) -> FakeEvent:
        return FakeEvent(self)

    def elapsed_ms(self, start: FakeEvent, end: FakeEvent) -> float:
        return (end.at - start.at) * 1000

    def spin(self, seconds: float) -> None:
        self.spins += 1
        self.launch(seconds, spin=True)

    def flush_l2(self) -> None:
        self.launch(FLUSH_S)
        self.flushes += 1
        self.l2_holds = None

    def capture(self, fn: Callable[[], object]) -> tuple[Callable[[], object] | None, str]:
        if self.capture_error:
            return None, self.capture_error
        self.captured = []
        fn()
        kernels, self.captured = self.captured, None
        return lambda: self.launch(sum(kernel() for kernel in kernels)), ""


class FakeModel:
    """A call: `host_s()` of host time (dispatch, guards), then a kernel of GPU time, longer
    with a cold L2 (`cold_s`): where L2 holds another model's weights, or none."""

    def __init__(self, gpu: FakeGpu, gpu_s: float = GPU_S,
                 host_s: Callable[[], float] = lambda: 50e-6, cold_s: float | None = None):
        self.gpu, self.gpu_s, self.host_s, self.cold_s = gpu, gpu_s, host_s, cold_s

    def __call__(self) -> None:
        if self.gpu.captured is not None:  # replays read L2 as they find it
            self.gpu.captured.append(self.kernel_s)
            return
        self.gpu.launch(self.kernel_s(), self.host_s())

    def kernel_s(self) -> float:
        gpu_s = self.cold_s if self.gpu.l2_holds is not self and self.cold_s else self.gpu_s
        self.gpu.l2_holds = self
        return gpu_s


def jitter(low: float, high: float, seed: int) -> Callable[[], float]:
    """Host time per call that varies from call to call and block to block."""
    draw = random.Random(seed)
    return lambda: draw.uniform(low, high)


def per_call_without_spin(gpu: FakeGpu, fn: Callable[[], object], calls: int) -> float:
    """The old CUDA timing: events around each call, nothing holding the stream."""
    spans = []
    for _ in range(calls):
        start, end = gpu.event(), gpu.event()
        start.record()
        fn()
        end.record()
        spans.append((start, end))
    gpu.synchronize()
    return statistics.fmean(gpu.elapsed_ms(start, end) for start, end in spans)


@pytest.mark.parametrize("method", [CUDA_GRAPH, BATCHED, PER_CALL])
def test_launch_overhead_varying_between_blocks_does_not_move_the_gpu_timing(method):
    """The host needs 20-150 us a call (5-15x the GPU's 10 us) and more on one side; the GPU
    time is the same on both. Per call timing without a spin reads the host."""
    gpu = FakeGpu()
    baseline = FakeModel(gpu, host_s=jitter(20e-6, 80e-6, seed=1))
    candidate = FakeModel(gpu, host_s=jitter(40e-6, 150e-6, seed=2))
    settings = TimingSettings(**{**SETTINGS.to_dict(), "gpu_method": method,
                                 "flush_l2": False})
    paired = pair_gpu(baseline, candidate, settings, gpu)

    assert paired.method == method
    assert paired.speedup == pytest.approx(1.0, abs=0.01)
    for ms in paired.baseline_ms + paired.candidate_ms:
        assert ms == pytest.approx(GPU_S * 1000, rel=0.01)
    assert paired.method_note == ""  # steady warm-up, no block outran its spin

    old_baseline = per_call_without_spin(gpu, baseline, 100)
    old_candidate = per_call_without_spin(gpu, candidate, 100)
    assert old_baseline > 3 * GPU_S * 1000  # the host's time, not the GPU's
    assert old_baseline / old_candidate < 0.7  # a "speedup" that is the host's


def test_a_graph_replay_needs_a_shorter_spin_than_batched_calls():
    gpu = FakeGpu()
    model = FakeModel(gpu, host_s=lambda: 100e-6)
    spins = {}
    for method in (CUDA_GRAPH, BATCHED):
        replay = gpu.capture(model) if method == CUDA_GRAPH else (model, "")
        blocks = Blocks(gpu, replay[0], method, flush_l2=False)
        warm_up(blocks, SETTINGS)
        spins[method] = blocks.spin_s
    assert spins[CUDA_GRAPH] < spins[BATCHED] / 5


@pytest.mark.parametrize("flush_l2, method, words", [
    (True, PER_CALL, "calls each timed alone"), (False, BATCHED, "batched calls")])
def test_a_failed_capture_falls_back_to_plain_calls_on_both_sides_and_says_why(
        flush_l2, method, words):
    """Plain calls keep the L2 policy asked for: cold calls each timed alone, or warm ones
    back to back."""
    gpu = FakeGpu(capture_error="RuntimeError: operation not permitted when stream is capturing")
    settings = TimingSettings(**{**SETTINGS.to_dict(), "flush_l2": flush_l2})
    paired = pair_gpu(FakeModel(gpu), FakeModel(gpu, gpu_s=2 * GPU_S), settings, gpu)
    assert paired.method == method
    assert paired.l2 == ("flushed" if flush_l2 else "warm")
    assert paired.method_note == ("no CUDA graph (RuntimeError: operation not permitted when "
                                  f"stream is capturing): {words} instead")
    assert paired.summary()["timing_note"] == paired.method_note
    assert paired.speedup == pytest.approx(0.5, rel=0.01)


@pytest.mark.parametrize("flush_l2, expected_s", [(True, 3 * GPU_S), (False, GPU_S)])
def test_graph_replays_are_timed_cold_each_alone_when_l2_is_flushed(flush_l2, expected_s):
    """A call whose weight L2 may hold (10 us warm, 30 us cold): flushed, every replay reads
    the cold time, the flush left out of it; warm, replays run back to back."""
    gpu = FakeGpu()
    settings = TimingSettings(**{**SETTINGS.to_dict(), "flush_l2": flush_l2, "samples": 4})
    timing = time_gpu(FakeModel(gpu, cold_s=3 * GPU_S), settings, gpu)
    assert (timing.method, timing.l2) == (CUDA_GRAPH, "flushed" if flush_l2 else "warm")
    assert timing.samples_ms == pytest.approx((expected_s * 1000,) * 4, rel=0.01)
    assert timing.calls_per_sample * expected_s >= SETTINGS.min_gpu_block_s


def test_blocks_are_calibrated_to_the_least_gpu_block_time():
    gpu = FakeGpu()
    settings = TimingSettings(**{**SETTINGS.to_dict(), "min_gpu_block_s": 0.002,
                                 "flush_l2": False})  # calls back to back, no cap of 50
    paired = pair_gpu(FakeModel(gpu), FakeModel(gpu, gpu_s=7 * GPU_S), settings, gpu)
    assert paired.baseline_calls > paired.candidate_calls > 1
    for ms, calls in [(paired.baseline_ms, paired.baseline_calls),
                      (paired.candidate_ms, paired.candidate_calls)]:
        block_s = [sample * calls / 1000 for sample in ms]
        assert min(block_s) >= 0.002
        assert max(block_s) <= 0.002 * (timing_data.CALIBRATION_AIM + 0.05)


def test_per_call_blocks_flush_l2_before_each_call_and_stop_at_their_cap():
    gpu = FakeGpu()
    model = FakeModel(gpu, cold_s=3 * GPU_S)
    settings = TimingSettings(**{**SETTINGS.to_dict(), "gpu_method": PER_CALL, "samples": 4,
                                 "min_gpu_block_s": 0.002})  # 67 calls of 30 us
    timing = time_gpu(model, settings, gpu)
    assert method_info(timing.method, timing.l2, timing.method_note) == {
        "timing_method": PER_CALL, "l2": "flushed"}
    assert timing.calls_per_sample == gpu_blocks.MAX_PER_CALL_BLOCK
    assert timing.samples_ms == pytest.approx((3 * GPU_S * 1000,) * 4)  # cold, flush left out


def test_warm_up_runs_until_the_gpu_is_steady():
    """The first ten blocks run at a ramping clock; warm-up outlasts them, then stops."""
    gpu = FakeGpu(slowdown=lambda blocks: 1 + max(0, 10 - blocks) * 0.2)
    blocks = Blocks(gpu, FakeModel(gpu), BATCHED, flush_l2=False)
    warmup = warm_up(blocks, SETTINGS)
    assert warmup.steady
    assert 10 <= warmup.blocks < 10 + 2 * gpu_blocks.STEADY_BLOCKS
    assert blocks() == pytest.approx(GPU_S * 1000)


def test_warm_up_stops_at_its_block_cap_when_never_steady():
    gpu = FakeGpu(slowdown=lambda blocks: 1 + 0.1 * (blocks % 2))  # throttling on and off
    model = FakeModel(gpu, host_s=lambda: 1e-6)  # short spins: blocks of about 1.2 ms
    warmup = warm_up(Blocks(gpu, model, BATCHED, flush_l2=False), SETTINGS)
    assert not warmup.steady
    assert warmup.blocks == gpu_blocks.MAX_WARMUP_BLOCKS


def test_warm_up_stops_at_its_time_cap_when_never_steady_and_says_so():
    gpu = FakeGpu(slowdown=lambda blocks: 1 + 0.1 * (blocks % 2))
    model = FakeModel(gpu, gpu_s=0.1)  # one call is a block of 0.1 s or 0.11 s
    timing = time_gpu(model, TimingSettings(**{**SETTINGS.to_dict(), "samples": 2}), gpu)
    warmup_s = gpu_blocks.MAX_WARMUP_S
    assert "warm-up of the call not steady after" in timing.method_note
    blocks = int(timing.method_note.split("after ")[1].split(" blocks")[0])
    assert warmup_s / 0.11 <= blocks <= warmup_s / 0.1 + 1


def test_blocks_whose_enqueueing_outlasts_the_capped_spin_are_reported():
    gpu = FakeGpu()
    slow_host = FakeModel(gpu, gpu_s=1e-6, host_s=lambda: 500e-6)  # spin would need 1 s
    paired = pair_gpu(slow_host, slow_host, TimingSettings(**{**SETTINGS.to_dict(),
                                                              "gpu_method": BATCHED}), gpu)
    assert "blocks may include host time" in paired.method_note


def test_the_paired_result_states_method_and_l2_in_its_summary():
    gpu = FakeGpu()
    paired = pair_gpu(FakeModel(gpu), FakeModel(gpu), SETTINGS, gpu)
    summary = paired.summary()
    assert summary["timing_method"] == CUDA_GRAPH
    assert summary["l2"] == "flushed"  # the default: cold, each replay timed alone
    assert summary["calls_per_block"] == [paired.baseline_calls, paired.candidate_calls]
    assert "timing_note" not in summary
    assert type(paired).from_dict(paired.to_dict()) == paired


def test_gpu_method_is_checked_and_defaults_to_cuda_graphs():
    assert TimingSettings().gpu_method == CUDA_GRAPH
    assert settings_problems({"gpu_method": "per_call"}, TimingSettings) == []
    assert settings_problems({"gpu_method": "fast"}, TimingSettings, "timing") == [
        "timing.gpu_method: must be one of cuda_graph, batched, per_call, not 'fast'"]


def test_kernel_cells_time_each_call_cold_unless_told_otherwise():
    from runner.kernels.spec import parse

    plain, batched = (parse({"shapes": [[8, 16]], "kernels": ["softmax"],
                             "directions": ["forward"], "backends": ["eager"], **extra},
                            "s.yml")[0]
                      for extra in ({}, {"timing": {"gpu_method": BATCHED}}))
    assert plain.timing_settings().gpu_method == PER_CALL
    assert batched.timing_settings().gpu_method == BATCHED
    assert plain.timing_settings({"gpu_method": CUDA_GRAPH}).gpu_method == CUDA_GRAPH


@pytest.mark.torch
def test_the_torch_timers_time_cuda_on_the_gpu_and_cpu_states_its_method():
    from runner.engine.torch_timers import CPU_BLOCKS, pair_cpu, pair_cuda, time_cuda

    gpu = FakeGpu()
    paired = pair_cuda(FakeModel(gpu), FakeModel(gpu, gpu_s=2 * GPU_S), SETTINGS, gpu)
    assert (paired.method, paired.speedup) == (CUDA_GRAPH, pytest.approx(0.5, rel=0.01))
    assert time_cuda(FakeModel(gpu), SETTINGS, gpu).method == CUDA_GRAPH

    now = [0.0]

    def call() -> None:
        now[0] += 0.001

    cpu = pair_cpu(call, call, TimingSettings(warmup_s=0, min_pairs=6, max_pairs=6),
                   clock=lambda: now[0])
    assert cpu.summary()["timing_method"] == CPU_BLOCKS
    assert "l2" not in cpu.summary()


def test_the_command_line_sets_the_gpu_method_and_block_time():
    import argparse

    from runner.cli.timing_options import add_timing_options, timing_overrides

    parser = argparse.ArgumentParser()
    add_timing_options(parser)
    args = parser.parse_args(["--gpu-method", "batched", "--min-gpu-block-time", "0.005"])
    assert timing_overrides(args) == {"gpu_method": BATCHED, "min_gpu_block_s": 0.005}
    assert timing_overrides(parser.parse_args([])) == {}
    with pytest.raises(SystemExit):
        parser.parse_args(["--gpu-method", "fast"])


def test_a_rotation_times_each_call_cold_back_to_back_without_evicting_reads_or_events():
    """Over copies of a model, each call finds L2 holding another copy's weights: cold, as a
    layer of a large model meets its weights. On an H200 a decode call read 0.0165 ms
    between its own events after an evicting read, 0.0140 ms over 8 rotated copies."""
    gpu = FakeGpu()
    slow = Rotation(tuple(FakeModel(gpu, cold_s=3 * GPU_S) for _ in range(4)))
    fast = Rotation(tuple(FakeModel(gpu, cold_s=1.5 * GPU_S) for _ in range(8)))
    timing = time_gpu(slow, SETTINGS, gpu)
    assert (timing.method, timing.l2) == (CUDA_GRAPH, "rotated")
    assert statistics.median(timing.samples_ms) == pytest.approx(3 * GPU_S * 1000, rel=0.02)
    assert "weights rotated over 4 copies" in timing.method_note
    assert gpu.flushes == 0  # no evicting read: the copies are the eviction
    paired = pair_gpu(slow, fast, SETTINGS, gpu)
    assert (paired.method, paired.l2) == (CUDA_GRAPH, "rotated")
    assert paired.speedup == pytest.approx(2.0, rel=0.02)
    assert "weights rotated over 4/8 copies" in paired.method_note
    assert method_info(paired.method, paired.l2, "")["l2"] == "rotated"


@pytest.mark.parametrize("capture_error, flush_l2, method, l2, first_calls", [
    ("", False, CUDA_GRAPH, "warm", 0),  # warm L2 asked for: no rotation
    # each copy's first call came before the capture failed
    ("operation not permitted when stream is capturing", True, PER_CALL, "flushed", 1),
])
def test_a_rotation_that_cannot_rotate_is_its_first_copys_call(capture_error, flush_l2,
                                                                method, l2, first_calls):
    gpu = FakeGpu(capture_error=capture_error)
    copies = [FakeModel(gpu, cold_s=3 * GPU_S) for _ in range(4)]
    called = []
    copies[1] = lambda: called.append(1)  # a copy the timed calls must not reach
    settings = TimingSettings(**{**SETTINGS.to_dict(), "flush_l2": flush_l2, "samples": 3})
    timing = time_gpu(Rotation(tuple(copies)), settings, gpu)
    assert (timing.method, timing.l2) == (method, l2) and len(called) == first_calls
    assert "rotated" not in timing.method_note
