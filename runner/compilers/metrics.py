"""Measuring a configuration: seed 001's total and per-iteration times, plus compile time,
peak memory, dynamo counters and (optionally) a PyTorch profile per repetition; and a
backend's speedup over eager, timed paired with an eager copy of the model.

A first call, timed on its own, compiles (its time less the median iteration is the
compile time); then `repeat` runs of `iterations_per_run` iterations each, synchronised at
the end of each run. Peak memory covers the first call and every run: on CUDA the peak
allocated by PyTorch's caching allocator; on CPU the rise of the process's peak resident
set (Linux: the high-water mark is reset through /proc/self/clear_refs before the first
call), which includes the compiler's own memory. Elsewhere it is left out, with a note.
"""

from __future__ import annotations

import statistics
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
import torch._dynamo.utils as dynamo_utils

from runner.compilers.harness import Prepared, prepare, reset_rng, synchronize
from runner.compilers.matrix import EAGER, Config
from runner.engine.paired import PairedTiming
from runner.engine.timing_data import TimingSettings
from runner.engine.torch_timers import pair_cpu, pair_cuda

MB = 2**20
PROFILE_ROWS = 200


def measure(config: Config, prepared: Prepared) -> dict[str, Any]:
    dynamo_utils.counters.clear()
    memory = _PeakMemory(config.device)
    reset_rng()
    started = time.perf_counter()
    prepared.step(False)
    synchronize(config.device)
    first = time.perf_counter() - started
    profiles = _Profiles(config) if config.dump_pytorch_profiles else None
    totals = []
    for repetition in range(config.repeat):
        reset_rng()
        with profiles.recording(repetition) if profiles else nullcontext():
            started = time.perf_counter()
            for _ in range(config.iterations_per_run):
                prepared.step(False)
            synchronize(config.device)
            totals.append(time.perf_counter() - started)
    metrics: dict[str, Any] = {
        "total_time": totals,
        "per_iter_time": [total / config.iterations_per_run for total in totals],
        "first_iter_time": first,
    }
    if config.backend != EAGER:
        metrics["compile_time"] = max(0.0, first - statistics.median(metrics["per_iter_time"]))
        counters = {group: dict(values) for group, values in dynamo_utils.counters.items()}
        metrics["dynamo_counters"] = counters
        metrics["graphs"] = counters.get("stats", {}).get("unique_graphs", 0)
        metrics["graph_breaks"] = sum(counters.get("graph_break", {}).values())
    metrics.update(memory.read())
    if profiles:
        metrics["pytorch_profiles"] = profiles.finish()
    return metrics


def pair_with_eager(config: Config, prepared: Prepared) -> PairedTiming:
    """This backend's speedup over eager (runner.engine.paired): an eager copy of the model and this
    one step in alternating blocks, in this process. Run after `measure`, so the eager copy
    adds nothing to the backend's own time and memory; comparing with the eager line of
    another process would turn any change of load between the two into "speedup"."""
    eager = prepare(config, backend=EAGER)
    # the configuration's threads stay as they are; with one, blocks count CPU time
    settings = TimingSettings(threads=torch.get_num_threads())
    timer = pair_cuda if config.device == "cuda" else pair_cpu
    return timer(lambda: eager.step(False), lambda: prepared.step(False), settings)


class _PeakMemory:
    CLEAR_REFS = Path("/proc/self/clear_refs")
    STATUS = Path("/proc/self/status")

    def __init__(self, device: str):
        self.device = device
        self.note = ""
        self.start_kb = 0
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
            return
        try:
            self.CLEAR_REFS.write_text("5")  # 5: reset the peak RSS to the current RSS
            self.start_kb = self._status_kb("VmRSS")
        except (OSError, KeyError, ValueError) as error:
            self.note = f"peak memory not measured on {device}: {error}"

    def _status_kb(self, field: str) -> int:
        for line in self.STATUS.read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
        raise KeyError(f"{self.STATUS} has no {field}")

    def read(self) -> dict[str, Any]:
        if self.device == "cuda":
            return {"peak_memory_mb": torch.cuda.max_memory_allocated() / MB,
                    "peak_memory_kind": "cuda_max_allocated"}
        if self.note:
            return {"peak_memory_note": self.note}
        rise_kb = max(0, self._status_kb("VmHWM") - self.start_kb)
        return {"peak_memory_mb": rise_kb / 1024, "peak_memory_kind": "cpu_peak_rss_rise"}


class _Profiles:
    """Seed 001's layout: OUTPUT/MODEL/REPEAT/{trace,pytorch-profile}-STEM.{json,txt}, and
    OUTPUT/MODEL/pytorch-profile-STEM.txt with every repetition's table."""

    def __init__(self, config: Config):
        self.config = config
        self.root = Path(config.output_dir) / config.model.name
        self.tables: list[str] = []
        self.paths: list[str] = []
        self.sort = "cuda_time_total" if config.device == "cuda" else "cpu_time_total"

    def recording(self, repetition: int) -> _Recording:
        return _Recording(self, repetition)

    def save(self, profile: torch.profiler.profile, repetition: int) -> None:
        folder = self.root / str(repetition)
        folder.mkdir(parents=True, exist_ok=True)
        stem = self.config.file_stem
        trace = folder / f"trace-{stem}.json"
        profile.export_chrome_trace(str(trace))
        table = profile.key_averages().table(sort_by=self.sort, row_limit=PROFILE_ROWS)
        (folder / f"pytorch-profile-{stem}.txt").write_text(table)
        self.tables.append(f"repetition {repetition}\n{table}")
        self.paths.append(str(trace))

    def finish(self) -> list[str]:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / f"pytorch-profile-{self.config.file_stem}.txt").write_text(
            "\n".join(self.tables))
        return self.paths


class _Recording:
    def __init__(self, profiles: _Profiles, repetition: int):
        activities = [torch.profiler.ProfilerActivity.CPU]
        if profiles.config.device == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self.profile = torch.profiler.profile(activities=activities)
        self.profiles, self.repetition = profiles, repetition

    def __enter__(self) -> None:
        self.profile.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self.profile.__exit__(*exc)
        if exc[0] is None:
            self.profiles.save(self.profile, self.repetition)
