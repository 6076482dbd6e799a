"""`bench run --wait` follows a job: a bar of cells done on a terminal (a line per step in a
log file), and each failed cell's error printed as it fails."""

import io
import re

import pytest
from django.core.management import CommandError, call_command

from benchsite.jobs import tasks
from benchsite.jobs.models import JobCell
from tests.jobs.conftest import SMALL_SPEC

pytestmark = pytest.mark.django_db(transaction=True)


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_wait_shows_a_bar_and_each_failure_as_it_happens(tmp_path, monkeypatch):
    def execute(cell):
        """The second cell fails; the others succeed (no torch needed)."""
        if cell.index == 1:
            raise RuntimeError("out of shared memory")
        tasks.finish(cell, JobCell.Status.SUCCEEDED)

    monkeypatch.setattr(tasks, "execute", execute)
    spec = tmp_path / "small.yml"
    spec.write_text(SMALL_SPEC)
    out, terminal = io.StringIO(), Terminal()
    with pytest.raises(CommandError, match=r"job \d+ ended partially_failed"):
        call_command("bench", "run", str(spec), "--wait", stdout=out, stderr=terminal)
    lines = out.getvalue().splitlines()
    failed = [line for line in lines if line.startswith("cell ")]
    assert failed == ["cell 1 tiny/linear/int8dq/32-64-64/bfloat16/cpu/eager failed: "
                      "RuntimeError: out of shared memory"]
    assert "4/4" in terminal.getvalue() and "partially_failed" in terminal.getvalue()
    log = io.StringIO()  # not a terminal (a log file): a line per step instead of a bar
    with pytest.raises(CommandError):
        call_command("bench", "run", str(spec), "--wait", stdout=out, stderr=log)
    assert re.fullmatch(r"job \d+: 4/4 cells done \(partially_failed\)\n", log.getvalue())
