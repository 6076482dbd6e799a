"""Running one configuration in a subprocess of its own, with a timeout.

The child (`runner.compilers.child`) starts in a new session, so a timeout kills it and
every process it started (inductor's compile workers). A crash or a timeout still gives a
results line: `metrics.error` says what happened and the code is VERIFIER_DIDNT_RUN, as the
seed writes it; the other configurations go on.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from runner.compilers import results
from runner.compilers.matrix import Config
from runner.compilers.verify import Code

ROOT = Path(__file__).resolve().parents[2]  # where the `runner` package lives
OUTPUT_TAIL = 4000  # characters of a crashed child's output kept in its line


def run(config: Config, accelerator_model: str, timestamp: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="experiment-") as folder:
        request, answer = Path(folder) / "config.json", Path(folder) / "result.json"
        request.write_text(json.dumps(config.to_dict()))
        metrics, code = _child(config, request, answer)
    return results.line(config, accelerator_model, timestamp, metrics, code)


def _child(config: Config, request: Path, answer: Path) -> tuple[dict[str, Any], str]:
    # The working directory comes first, as with `python -m`, so users' factories import.
    paths = [os.getcwd(), str(ROOT), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    command = [sys.executable, "-m", "runner.compilers.child", str(request), str(answer)]
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, errors="replace", env=env,
                                   start_new_session=True)
    except OSError as error:
        return {"error": f"could not start {command[0]}: {error}"}, Code.VERIFIER_DIDNT_RUN
    try:
        output, _ = process.communicate(timeout=config.timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(process.pid)
        output, _ = process.communicate()
        return ({"error": f"timed out after {config.timeout_s:g} s; its last output:\n"
                          f"{_tail(output)}", "timed_out": True}, Code.VERIFIER_DIDNT_RUN)
    except BaseException:  # Ctrl-C or SIGTERM: the child must not outlive the run
        _kill_group(process.pid)
        process.wait()
        raise
    if process.returncode != 0 or not answer.exists():
        return ({"error": f"the subprocess {_exit(process.returncode)}; its last output:\n"
                          f"{_tail(output)}"}, Code.VERIFIER_DIDNT_RUN)
    result = json.loads(answer.read_text())
    return result["metrics"], result["verification_code"]


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended on its own meanwhile
        os.killpg(pid, signal.SIGKILL)


def _exit(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with status {code}" if code else "wrote no result"


def _tail(output: str | None) -> str:
    return (output or "")[-OUTPUT_TAIL:]
