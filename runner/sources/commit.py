"""Running planned cells of a spec at one built commit: a subprocess with the commit's
interpreter and environment (`python -m runner.sources.child`) runs them through
runner.families, as a job's worker would, and hands back each cell's outcome."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.sources.builds import Built

OUTPUT_TAIL = 4000


class RunFailed(RuntimeError):
    """The commit's subprocess did not run the cells through (import error, crash, timeout)."""

    def __init__(self, sha: str, reason: str, output_tail: str = ""):
        super().__init__(f"{sha[:12]}: {reason}")
        self.sha, self.reason, self.output_tail = sha, reason, output_tail


@dataclass(frozen=True)
class CellRun:
    """One cell's outcome at the commit (runner.engine.cells.Outcome, as JSON)."""

    key: str
    status: str  # runner.contract.status: ok, skipped, failed
    error: str
    records: list[dict[str, Any]]


def run_cells(built: Built, family: str, cells: list[Mapping[str, Any]],
              settings: Mapping[str, Any], timeout_s: float, files: Path) -> list[CellRun]:
    """Run `cells` (each {"key", "cell"}) of `family` at the commit, their files under
    `files`; RunFailed when the subprocess fails."""
    with tempfile.TemporaryDirectory(prefix="commit-run-") as folder:
        request, answer = Path(folder) / "request.json", Path(folder) / "answer.json"
        request.write_text(json.dumps({"family": family, "cells": list(cells),
                                       "settings": dict(settings), "files": str(files)}))
        command = [built.python, "-m", "runner.sources.child", str(request), str(answer)]
        process = subprocess.Popen(command, cwd=built.checkout, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, errors="replace",
                                   env={**os.environ, **built.env}, start_new_session=True)
        try:
            output, _ = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill(process)
            raise RunFailed(built.sha, f"timed out after {timeout_s:g} s",
                            (process.communicate()[0] or "")[-OUTPUT_TAIL:]) from None
        except BaseException:  # the worker is stopping: the subprocess must not outlive it
            _kill(process)
            raise
        if process.returncode or not answer.exists():
            raise RunFailed(built.sha, f"the run exited with status {process.returncode}",
                            (output or "")[-OUTPUT_TAIL:])
        return [CellRun(**outcome) for outcome in json.loads(answer.read_text())]


def _kill(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
