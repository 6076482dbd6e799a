"""The worker pool without callgrind: pinning, a failing definition recorded as failed while
the others finish, timeouts that kill what the worker started, and retries of dead workers."""

import os
from pathlib import Path

import pytest

from runner.contract.status import FAILED, SKIPPED
from runner.instructions.callgrind import MeasureSettings, Pool
from runner.instructions.definitions import Benchmark, Definition, Signature

pytestmark = pytest.mark.torch
SETTINGS = MeasureSettings(retries=1)


def definition(name, stmt, setup="", **extra):
    return Benchmark(Definition(name, setup=setup, stmt=stmt, **extra))


def test_workers_are_pinned_one_core_each(tmp_path):
    cores = sorted(os.sched_getaffinity(0))
    assert Pool(1).cpus == cores[:1] and Pool().cpus == cores
    assert Pool(cores=cores[-1:]).cpus == cores[-1:]
    with pytest.raises(ValueError, match=f"{len(cores) + 1} pinned workers need as many"):
        Pool(len(cores) + 1)
    seen = tmp_path / "affinity"
    [result] = Pool(1).run([definition(
        "where", "raise ValueError('stop here')",
        setup=f"import os\nopen({str(seen)!r}, 'w').write(str(sorted(os.sched_getaffinity(0))))"
    )], SETTINGS)
    assert result.status == FAILED and "ValueError: stop here" in result.error
    assert seen.read_text() == str(cores[:1])


def test_a_timeout_kills_the_worker_and_what_it_started_and_the_rest_still_run(tmp_path):
    child = tmp_path / "child.pid"
    slow = definition("slow", "time.sleep(60)", timeout_s=3, setup=(
        "import subprocess, time\n"
        f"open({str(child)!r}, 'w').write(str(subprocess.Popen(['sleep', '60']).pid))"))
    broken = definition("broken", "y = undefined_name")
    no_torchscript = Benchmark(Definition("tolist", setup="x = torch.ones(3)",
                                          stmt="y = x.tolist()",
                                          signature=Signature.parse("f(x) -> y")), "torchscript")
    finished = []
    results = Pool(1).run([slow, broken, no_torchscript], SETTINGS,
                          on_result=lambda result: finished.append(result.benchmark.key))
    assert [r.status for r in results] == [FAILED, FAILED, SKIPPED]
    assert finished == [slow.key, broken.key, no_torchscript.key]
    assert results[0].error == "attempt 1: timed out after 3 s" and results[0].attempts == 1
    assert 3 <= results[0].seconds < 10
    assert "NameError: name 'undefined_name' is not defined" in results[1].error
    assert results[1].attempts == 1  # an error of the definition is not retried
    assert results[2].error.startswith("TorchScript: cannot be scripted")
    status = Path(f"/proc/{child.read_text()}/status")
    assert not status.exists() or "State:\tZ" in status.read_text()  # killed with the worker


def test_a_worker_that_dies_is_restarted_and_the_benchmark_retried():
    [result] = Pool(1).run([definition("exits", "pass", setup="import os\nos._exit(3)")],
                           SETTINGS)
    assert result.status == FAILED and result.attempts == 2
    lines = [line for line in result.error.splitlines() if line.startswith("attempt")]
    assert lines == ["attempt 1: the worker process exited with code 3; its last output:",
                     "attempt 2: the worker process exited with code 3; its last output:"]
