"""The runner's commands speak plainly: the upload client names missing run metadata in one
line before it sends anything; long runs show a bar on a terminal, a line per item in logs,
and failures either way."""

import io
import json
import sys

import pytest

from runner.cli import main, upload
from runner.cli.progress import Progress

RECORD = {"benchmark": {"name": "micro-benchmark api"}, "model": {"name": "linear"},
          "metric": {"name": "Fwd Speedup (x)", "benchmark_values": [1.5]}}


@pytest.fixture
def outside_ci(monkeypatch):
    for name in ("GITHUB_REPOSITORY", "GITHUB_SHA", "GITHUB_REF_NAME", "GITHUB_HEAD_REF"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def sent(monkeypatch):
    """What would have gone to the server."""
    calls = []

    def fake(prepared, **options):
        calls.append(prepared.metadata)
        return upload.UploadResult(upload_id=len(calls), records=1, created=True)

    monkeypatch.setattr(upload, "send", fake)
    return calls


def test_missing_run_metadata_is_one_line_and_nothing_is_sent(tmp_path, outside_ci, sent,
                                                                capsys):
    path = tmp_path / "results.json"
    path.write_text(json.dumps([RECORD] * 20))
    lines = tmp_path / "more.jsonl"
    lines.write_text(json.dumps({**RECORD, "repo": "pytorch/ao"}) + "\n")
    assert main(["upload", str(path), str(lines), "--server", "http://x", "--token", "t"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: nothing sent: run metadata missing: repo (20 records), head_branch "
                   "(21 records), head_sha (21 records); give --repo, --head-branch, --head-sha "
                   "(in GitHub Actions they come from GITHUB_REPOSITORY, GITHUB_HEAD_REF or "
                   "GITHUB_REF_NAME, and GITHUB_SHA)"]
    assert sent == []


def test_options_or_the_records_themselves_complete_the_metadata(tmp_path, outside_ci, sent,
                                                                   capsys):
    path = tmp_path / "results.json"
    path.write_text(json.dumps([RECORD]))
    assert main(["upload", str(path), "--server", "http://x", "--token", "t", "--repo",
                 "pytorch/ao", "--head-branch", "main", "--head-sha", "a" * 40]) == 0
    assert sent[0]["head_sha"] == "a" * 40
    complete = tmp_path / "complete.json"
    complete.write_text(json.dumps({**RECORD, "repo": "pytorch/ao", "head_branch": "main",
                                    "head_sha": "b" * 40}))
    assert main(["upload", str(complete), "--server", "http://x", "--token", "t"]) == 0
    assert len(sent) == 2 and "stored as upload 2" in capsys.readouterr().out


class Terminal(io.StringIO):
    def isatty(self):
        return True


def run_items(monkeypatch, stderr, quiet=False):
    monkeypatch.setattr(sys, "stderr", stderr)
    with Progress(3, "cell", quiet=quiet) as progress:
        progress.item("1/3  ok      a", status="1 ok")
        progress.item("2/3  failed  b  RuntimeError: boom", failed=True)
        progress.item("3/3  ok      c", status="2 ok, 1 failed")


def test_a_terminal_gets_a_bar_and_the_failures(monkeypatch, capsys):
    terminal = Terminal()
    run_items(monkeypatch, terminal)
    assert capsys.readouterr().out == "2/3  failed  b  RuntimeError: boom\n"
    assert "3/3" in terminal.getvalue() and "2 ok, 1 failed" in terminal.getvalue()


def test_a_log_gets_a_line_per_item_and_quiet_only_the_failures(monkeypatch, capsys):
    log = io.StringIO()
    run_items(monkeypatch, log)
    assert capsys.readouterr().out.splitlines() == [
        "1/3  ok      a", "2/3  failed  b  RuntimeError: boom", "3/3  ok      c"]
    assert log.getvalue() == ""  # no bar
    run_items(monkeypatch, Terminal(), quiet=True)
    assert capsys.readouterr().out.splitlines() == ["2/3  failed  b  RuntimeError: boom"]
