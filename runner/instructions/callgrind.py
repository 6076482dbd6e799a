"""Counting in parallel: worker processes pinned to cores, retries and per-definition timeouts.

Each slot of the pool owns one worker process (`python -m runner.instructions.worker`),
pinned to one core, and sends it one benchmark at a time as a JSON line. torch's callgrind
collection starts valgrind as a child of the worker, so a worker is started in its own
session and a timeout kills its whole process group. A worker that dies, or a collection
that fails (callgrind occasionally does), is retried; a timeout or an error of the
definition itself is not: it would only happen again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.contract.status import FAILED, SKIPPED
from runner.engine.run_settings import above, at_least
from runner.instructions.definitions import Benchmark

PASSED_ENV = ("HOME", "LANG", "TMPDIR", "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV")
SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin")
LOG_TAIL = 2000  # characters of a dead worker's stderr kept in its error
START_TIMEOUT_S = 300.0  # for a worker to import torch (not counted in a benchmark's timeout)
# glibc's malloc trims and moves its thresholds as the heap changes, which made repeats of
# `x + x` differ by up to 3%; fixed thresholds keep them within 0.2% (number = 1000).
STEADY_MALLOC = ("glibc.malloc.trim_threshold=1073741824:glibc.malloc.mmap_threshold=33554432"
                 ":glibc.malloc.top_pad=268435456")


@dataclass(frozen=True)
class MeasureSettings:
    """How to count; checked with runner.engine.run_settings (a spec's keys, a job's settings)."""

    # calls of the statement per count, unless its definition sets one
    number: int = field(default=1000, metadata=at_least(1))
    repeats: int = field(default=3, metadata=at_least(1))  # counts per benchmark, each a value
    # per benchmark (all its work in the worker), unless it sets one
    timeout_s: float = field(default=900.0, metadata=above(0))
    # further attempts after a worker died or callgrind failed
    retries: int = field(default=2, metadata=at_least(0))
    # least time of the wall-clock measurement
    wall_time_s: float = field(default=0.2, metadata=at_least(0))

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]


@dataclass
class Measurement:
    benchmark: Benchmark
    status: str
    counts: list[int] = field(default_factory=list)  # instructions per repeat, `number` calls
    number: int = 0
    wall_us: list[float] = field(default_factory=list)  # microseconds per call, per block
    error: str = ""  # the skip reason, or what failed
    attempts: int = 0
    seconds: float = 0.0  # in the worker, all attempts

    @property
    def per_call(self) -> list[float]:
        return [count / self.number for count in self.counts]

    @property
    def spread(self) -> float | None:
        """(max - min) / median of the counts: how repeatable they were."""
        if not self.counts:
            return None
        return (max(self.counts) - min(self.counts)) / statistics.median(self.counts)


def worker_env() -> dict[str, str]:
    """The same small environment for every worker, whoever starts it (the CLI, pytest, a
    Celery worker): the environment is copied onto the stack and into Python's heap, and the
    count of a small program moved with it by up to 1%."""
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    # torch runs callgrind's Python as `python` from PATH and refuses another interpreter.
    paths = [str(Path(sys.executable).parent), *SYSTEM_PATH]
    valgrind = shutil.which("valgrind")
    if valgrind:
        paths.insert(1, str(Path(valgrind).parent))
    env["PATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["PYTHONHASHSEED"] = "0"  # the same dict layouts, run after run
    env["GLIBC_TUNABLES"] = STEADY_MALLOC
    return env


class _Timeout(Exception):
    pass


class _Died(Exception):
    pass


class _Worker:
    """One worker process, started on first use and again after it was killed or died."""

    def __init__(self, cpu: int, log: Path):
        self.cpu, self.log = cpu, log
        self.process: subprocess.Popen | None = None
        self.buffer = b""

    def ask(self, task: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        if self.process is None:
            self._start()
        assert self.process is not None and self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(task).encode() + b"\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            raise _Died(self._death()) from None
        return json.loads(self._read_line(time.monotonic() + timeout_s))

    def _start(self) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "runner.instructions.worker", "--cpu", str(self.cpu)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=worker_env(),
                start_new_session=True)
        self.buffer = b""
        try:
            self._read_line(time.monotonic() + START_TIMEOUT_S)  # it is ready
        except _Timeout:
            self.stop()
            raise _Died(f"the worker did not start within {START_TIMEOUT_S:g} s") from None

    def _read_line(self, deadline: float) -> bytes:
        assert self.process is not None and self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Timeout
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise _Died(self._death())
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def _death(self) -> str:
        assert self.process is not None
        code = self.process.wait()
        self.process = None
        tail = self.log.read_text(errors="replace")[-LOG_TAIL:] if self.log.exists() else ""
        return f"the worker process exited with code {code}; its last output:\n{tail}"

    def stop(self) -> None:
        """Kill the worker and whatever it started (valgrind)."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):  # it had ended
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.process = None


class Pool:
    """`workers` slots, each pinned to one of `cores` (default: the allowed cores).

    Always pinned: a small program's count differs by about 1% between a pinned and an
    unpinned process (and not between cores), so every run must count the same way."""

    def __init__(self, workers: int | None = None, cores: list[int] | None = None):
        cores = sorted(cores or os.sched_getaffinity(0))
        count = workers or len(cores)
        if count < 1:
            raise ValueError(f"workers: must be at least 1, not {count}")
        if count > len(cores):
            raise ValueError(f"workers: {count} pinned workers need as many cores; "
                             f"{len(cores)} are allowed ({cores})")
        self.cpus = cores[:count]

    def run(self, benchmarks: list[Benchmark], settings: MeasureSettings,
            on_result: Callable[[Measurement], None] | None = None) -> list[Measurement]:
        """Measure every benchmark; results in the order given. Ctrl-C kills the workers."""
        todo: queue.SimpleQueue[int] = queue.SimpleQueue()
        for index in range(len(benchmarks)):
            todo.put(index)
        results: list[Measurement | None] = [None] * len(benchmarks)
        report = threading.Lock()
        stopping = threading.Event()

        with tempfile.TemporaryDirectory(prefix="instructions-") as logs:
            workers = [_Worker(cpu, Path(logs) / f"worker-{number}.log")
                       for number, cpu in enumerate(self.cpus[:len(benchmarks)])]

            def serve(worker: _Worker) -> None:
                while not stopping.is_set():
                    try:
                        index = todo.get_nowait()
                    except queue.Empty:
                        return
                    result = _measure(worker, benchmarks[index], settings)
                    results[index] = result
                    if on_result is not None:
                        with report:
                            on_result(result)

            threads = [threading.Thread(target=serve, args=(worker,), daemon=True)
                       for worker in workers]
            try:
                for thread in threads:
                    thread.start()
                for thread in threads:
                    while thread.is_alive():
                        thread.join(0.2)
            finally:
                stopping.set()
                for worker in workers:
                    worker.stop()
        assert all(result is not None for result in results)
        return results  # type: ignore[return-value]


def _measure(worker: _Worker, benchmark: Benchmark, settings: MeasureSettings) -> Measurement:
    reason = benchmark.cannot_run()
    if reason:
        return Measurement(benchmark, SKIPPED, error=reason)
    timeout_s = benchmark.timeout_s or settings.timeout_s
    task = {"benchmark": benchmark.to_dict(), "settings": dataclasses.asdict(settings)}
    started = time.monotonic()
    problems = []
    for attempt in range(1, settings.retries + 2):
        try:
            reply = worker.ask(task, timeout_s)
        except _Timeout:
            worker.stop()
            problems.append(f"attempt {attempt}: timed out after {timeout_s:g} s")
            break
        except _Died as died:
            problems.append(f"attempt {attempt}: {died}")
            continue
        if reply["status"] != FAILED:
            return Measurement(benchmark, reply["status"], counts=reply.get("counts", []),
                               number=reply.get("number", 0), wall_us=reply.get("wall_us", []),
                               error=reply.get("reason", ""), attempts=attempt,
                               seconds=time.monotonic() - started)
        problems.append(f"attempt {attempt}: {reply['error']}")
        if not reply.get("retry"):
            break
    return Measurement(benchmark, FAILED, error="\n".join(problems), attempts=len(problems),
                       seconds=time.monotonic() - started)
