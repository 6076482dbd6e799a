"""CPU timing with a fake clock: warm-up, calibration and samples, exactly."""

import pytest

from runner.engine.timing_data import Timing, TimingSettings

pytestmark = pytest.mark.torch


class FakeModel:
    """Each call advances the fake clock by `cost` seconds."""

    def __init__(self, cost: float, first_call: float = 0.0):
        self.now = 0.0
        self.calls = 0
        self.cost = cost
        self.first_call = first_call

    def clock(self) -> float:
        return self.now

    def __call__(self) -> None:
        self.now += self.first_call if self.calls == 0 else self.cost
        self.calls += 1


def test_samples_are_calibrated_to_the_minimum_sample_time():
    from runner.engine.torch_timers import time_cpu

    model = FakeModel(cost=0.001, first_call=5.0)  # a slow first call, as when compiling
    settings = TimingSettings(samples=4, warmup_s=0.05, min_sample_s=0.01)
    timing = time_cpu(model, settings, clock=model.clock)
    assert timing.calls_per_sample >= 10
    assert timing.samples_ms == pytest.approx((1.0,) * 4)
    warmup_calls = model.calls - 1 - 4 * timing.calls_per_sample
    assert warmup_calls * 0.001 >= 0.05  # the compile call does not count as warm-up


def test_calibrated_blocks_stay_near_the_minimum_sample_time():
    """Blocks are sized by scaling the calls, not by a whole multiplier of them: 10 calls of
    0.35 ms (3.5 ms) grow to 32 calls (11.2 ms, 10% past the 10 ms asked), not to 40 (14 ms)."""
    from runner.engine.timing_data import CALIBRATION_AIM
    from runner.engine.torch_timers import time_cpu

    model = FakeModel(cost=0.00035)
    settings = TimingSettings(samples=2, warmup_s=0.0, min_sample_s=0.01)
    timing = time_cpu(model, settings, clock=model.clock)
    assert timing.calls_per_sample == 32
    block_s = timing.calls_per_sample * 0.00035
    assert settings.min_sample_s <= block_s <= settings.min_sample_s * (CALIBRATION_AIM + 0.05)


def test_slow_calls_take_one_call_per_sample():
    from runner.engine.torch_timers import time_cpu

    model = FakeModel(cost=0.5)
    timing = time_cpu(model, TimingSettings(samples=3, warmup_s=0.0, min_sample_s=0.01),
                      clock=model.clock)
    assert timing.calls_per_sample == 1
    assert timing.samples_ms == pytest.approx((500.0,) * 3)
    assert timing.measured_s == pytest.approx(1.5)


def test_cpu_timing_runs_with_the_fixed_thread_count():
    import torch

    from runner.engine.torch_timers import measure

    before = torch.get_num_threads()
    seen = set()
    measure(lambda: seen.add(torch.get_num_threads()), "cpu",
            TimingSettings(samples=2, warmup_s=0.0, min_sample_s=0.0, threads=1))
    assert seen == {1}
    assert torch.get_num_threads() == before


def test_timing_statistics():
    timing = Timing((1.0, 2.0, 3.0, 4.0, 100.0), calls_per_sample=10)
    assert timing.median_ms == 3.0
    assert timing.measured_s == pytest.approx(1.1)
    assert timing.spread > 1
    assert Timing((2.0,)).spread == 0.0
    assert timing.instability("eager") == (f"unstable eager timing: IQR {timing.spread:.0%} "
                                           "of the median")
    assert Timing((1.0, 1.01, 1.02, 1.03)).instability("eager") is None


def test_cuda_per_call_timing_flushes_l2_before_every_timed_call_behind_a_spin(monkeypatch):
    """The CUDA calls of a per_call block, checked with stand-ins for torch.cuda."""
    import torch

    from runner.engine import gpu_blocks
    from runner.engine import torch_timers as timers

    log = []

    class Event:
        def __init__(self, enable_timing):
            assert enable_timing

        def record(self):
            log.append("event")

        def elapsed_time(self, end):
            return 0.25

    class Buffer:
        def zero_(self):
            log.append("flush")

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: log.append("sync"))
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: log.append("spin"))
    monkeypatch.setattr(gpu_blocks.TorchCuda, "flush_l2", lambda self: Buffer().zero_())
    # A host clock that advances 1 us a reading: enqueueing these stand-ins takes far less
    # than the spin, as on a GPU, where a loaded CI machine's real clock said otherwise.
    ticks = iter(range(10**6))
    monkeypatch.setattr(gpu_blocks.TorchCuda, "host_time", lambda self: next(ticks) * 1e-6)
    settings = TimingSettings(samples=3, warmup_s=0.0, gpu_method="per_call",
                              min_gpu_block_s=0.001)
    result = timers.time_cuda(lambda: log.append("call"), settings)
    # 0.25 ms a call: blocks of 5 calls (1.25 ms) reach the 1 ms asked
    assert result == Timing((0.25, 0.25, 0.25), 5, "per_call", "flushed")
    last_block = log[len(log) - 1 - log[::-1].index("spin"):]
    assert last_block == ["spin"] + ["flush", "event", "call", "event"] * 5 + ["sync"]

    log.clear()
    timers.time_cuda(lambda: log.append("call"),
                     TimingSettings(**{**settings.to_dict(), "flush_l2": False}))
    assert "flush" not in log
