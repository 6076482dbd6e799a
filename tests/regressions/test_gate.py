"""`python -m runner gate` against a live server."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from benchsite.comparison import environments
from runner.cli import gate as gate_module
from runner.cli import main
from tests.regressions.factory import H100, record, sha, upload, with_torch

pytestmark = pytest.mark.django_db(transaction=True)
HOSTILE = "<img src=x onerror=alert(1)>|`x`"


@pytest.fixture
def commits():
    """Ten quiet nights of history, then a +50 % step at night 11 that stays."""
    for night in range(11):
        upload(night, [record("steady", [1.0, 1.01 + night % 2 / 200, 0.99]),
                       record(HOSTILE, [1.0, 1.01, 0.99 + night % 3 / 300, 1.0])])
    upload(11, [record("steady", [1.0, 1.01, 0.99]), record(HOSTILE, [1.5, 1.51, 1.49, 1.5])])
    upload(12, [record("steady", [1.0, 1.0, 1.0]), record(HOSTILE, [1.49, 1.5, 1.5, 1.51])])


def gate(server: str, base: int, head: int, *extra: str) -> int:
    return main(["gate", "--server", server, "--repo", "pytorch/ao", "--base", sha(base),
                 "--head", sha(head), *extra])


def test_a_regression_fails_the_gate_with_a_markdown_summary(live_server, commits, capsys):
    assert gate(live_server.url, 10, 11) == 1
    out = capsys.readouterr().out
    assert "**Verdict: regression** — 1 regression, 0 improvement" in out
    assert "#### Regressions" in out and "+50.0 %" in out and "from the level" in out
    assert "history on `main`" in out
    # inert in a comment; the series told apart by its mode and dtype
    assert "| &lt;img src=x onerror=alert(1)&gt;\\|\\`x\\` (inference, int8dq) |" in out
    assert "<img" not in out
    # The page judges at the rate the gate did.
    assert (f"[Full comparison]({live_server.url}/compare/{sha(10)}...{sha(11)}"
            f"?repo=pytorch%2Fao&fdr=0.005)") in out


def test_no_regression_passes_and_fail_on_chooses_what_fails(live_server, commits, capsys):
    assert gate(live_server.url, 11, 12) == 0  # the step is the base's: not this change's
    assert "**Verdict: unchanged**" in capsys.readouterr().out
    assert gate(live_server.url, 8, 9) == 0
    assert gate(live_server.url, 10, 11, "--model", "steady") == 0
    assert gate(live_server.url, 10, 11, "--fail-on", "improvement") == 0
    assert gate(live_server.url, 10, 11, "--fail-on", "improvement,regression") == 1


def test_a_gate_that_cannot_compare_exits_3_and_says_why(live_server, commits, capsys):
    def run(repo: str, base: str, head: str) -> tuple[int, str]:
        code = main(["gate", "--server", live_server.url, "--repo", repo, "--base", base,
                     "--head", head])
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    code, text = run("pytorch/ao", "f" * 40, sha(11))
    assert code == 3 and "no results of pytorch/ao at it" in text
    code, text = run("pytorch/ao", sha(10)[:5], sha(11))
    assert code == 3 and "too short" in text
    code, text = run("pytorch/a0", sha(10), sha(11))
    assert code == 3 and "did you mean pytorch/ao" in text
    upload(20, [record("steady", [1.0])], head_sha=sha(10)[:9] + "0" * 31)
    code, text = run("pytorch/ao", sha(10)[:8], sha(11))
    assert code == 3 and "prefix of 2 commits" in text
    upload(21, [record("elsewhere", [1.0])])
    code, text = run("pytorch/ao", sha(21), sha(11))
    assert code == 3 and "Cannot compare" in text
    assert run("pytorch/ao", sha(10)[:8] + "f", sha(11))[0] == 3
    assert run("pytorch/ao", sha(10)[:10], sha(11)[:7])[0] == 1  # unique prefixes resolve


def test_usage_and_connection_errors_exit_2(live_server, commits, capsys):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    assert gate(f"http://127.0.0.1:{port}", 10, 11) == 2
    assert "error: http://127.0.0.1" in capsys.readouterr().err
    assert main(["gate", "--server", live_server.url, "--repo", "", "--base", sha(10),
                 "--head", sha(11)]) == 2
    err = capsys.readouterr().err
    assert "HTTP 400" in err and "repo: required" in err
    with pytest.raises(SystemExit) as usage:
        gate(live_server.url, 10, 11, "--fail-on", "worse")
    assert usage.value.code == 2


def test_changes_within_the_noise_are_listed_with_what_confirms_them():
    from runner.cli.gate import markdown

    row = {"state": "noisy", "benchmark": "micro", "model": "int8dq-1024", "metric": "time",
           "arch": "H100", "device": "cuda", "base": 1.0, "head": 1.08, "change": 0.08,
           "rule": "+8.0% from the level, 3.9x its noise (2.0%): within the noise of 100 "
                   "series compared (adjusted p=0.3, needs 0.005)"}
    text = markdown({"repo": "pytorch/ao", "base": "a" * 40, "head": "b" * 40,
                     "counts": {"noisy": 1, "unchanged": 99}, "verdict": "unchanged",
                     "branches": ["main"], "fdr": 0.005, "rows": [row]}, "http://bench")
    section = text.split("#### Within the noise", 1)[1]
    assert "1 series moved past their tolerance" in section
    assert "Running the benchmarks again at the head commit" in section
    assert "| micro | int8dq-1024 | time | H100 | 1 | 1.08 | +8.0 % |" in section
    quiet = markdown({"repo": "pytorch/ao", "base": "a" * 40, "head": "b" * 40,
                      "counts": {"unchanged": 1}, "verdict": "unchanged", "rows": []}, "x")
    assert "Within the noise" not in quiet


def test_a_cell_that_crashes_at_the_head_fails_the_gate(live_server, capsys):
    from runner.contract.status import status_metric

    def failed(error: str) -> dict:
        return {**record("int8dq-16", []), "metric": status_metric("failed", error)}

    for night in range(6):
        upload(night, [record("int8dq-16", [1.0]), record("steady", [1.0])])
    upload(6, [failed("Traceback ...\nRuntimeError: self.size(0) needs to be greater than 16"),
               record("steady", [1.0])])
    upload(7, [failed("RuntimeError: the same"), record("steady", [1.0])])
    assert gate(live_server.url, 5, 6) == 1
    out = capsys.readouterr().out
    assert ("| int8dq-16 (inference, int8dq) | status | NVIDIA H100 80GB HBM3 | 1 | 0 | "
            "-100.0 % | the cell failed at the head, not at the base: RuntimeError: "
            "self.size(0) needs to be greater than 16 |") in out
    assert "1 regression, 0 improvement, 0 changed, 0 noisy, 0 insufficient data, 0 new, " \
           "1 missing" in out  # (its time: missing alone fails no gate)
    assert gate(live_server.url, 6, 7) == 0  # failing at both: not the head's doing


@pytest.fixture
def torch_bump():
    """Nights 1 and 2 on torch 2.5.0, the same numbers on torch 2.6.0 at night 3, and a
    regression on torch 2.5.0 at night 4."""
    def night(values: list[float], torch: str) -> list[dict]:
        return [with_torch(record("steady", values), torch)]

    upload(1, night([1.0, 1.01, 0.99, 1.0, 1.0], "2.5.0"))
    upload(2, night([1.0, 1.0, 1.01, 0.99, 1.0], "2.5.0"))
    upload(3, night([1.0, 1.01, 0.99, 1.0, 1.0], "2.6.0"))
    upload(4, night([1.3, 1.31, 1.29, 1.3, 1.3], "2.5.0"))


def test_the_environment_diff_is_printed_and_same_environment_refuses_it(
        live_server, torch_bump, capsys):
    assert gate(live_server.url, 1, 3) == 0  # without the option: printed only
    out = capsys.readouterr().out
    section = out.split("#### Environment changed\n\n", 1)[1]
    assert section.startswith(f"- {H100} (job nightly): torch 2.5.0 → 2.6.0; cuda, gpu "
                              "unchanged\n")
    assert gate(live_server.url, 1, 3, "--same-environment") == 3
    captured = capsys.readouterr()
    assert "#### Environment changed" in captured.out  # printed before refusing
    assert f"**Cannot compare** (--same-environment): the environment differs on {H100}." \
        in captured.out
    assert captured.err == f"error: cannot compare: the environment differs on {H100}\n"


def test_the_same_environment_judges_as_usual(live_server, torch_bump, capsys):
    assert gate(live_server.url, 1, 2, "--same-environment") == 0
    assert gate(live_server.url, 2, 4, "--same-environment") == 1  # a regression
    out = capsys.readouterr().out
    assert "Environment" not in out and "**Verdict: regression**" in out


def test_an_unknown_environment_is_said_and_cannot_pass_same_environment(
        live_server, commits, capsys):
    assert gate(live_server.url, 11, 12) == 0  # (records without an environment)
    out = capsys.readouterr().out
    assert "#### Environment unknown" in out and f"- {H100} (job nightly): environment unknown " \
        "at both commits" in out
    assert gate(live_server.url, 11, 12, "--same-environment") == 3
    assert capsys.readouterr().err == \
        f"error: cannot compare: the environment is not known on {H100}\n"


class _OlderServer(ThreadingHTTPServer):
    """A server whose comparisons have no `environment` (before it was reported)."""

    answer = {"repo": "pytorch/ao", "base": "a" * 40, "head": "b" * 40, "branches": ["main"],
              "fdr": 0.005, "verdict": "unchanged", "counts": {"unchanged": 1},
              "rows": [{"state": "unchanged"}]}

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Answer)


class _Answer(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps(self.server.answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_server_that_does_not_report_environments_cannot_pass_same_environment(capsys):
    server = _OlderServer()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert gate(url, 1, 2) == 0
        assert "Environment" not in capsys.readouterr().out
        assert gate(url, 1, 2, "--same-environment") == 3
        assert capsys.readouterr().err == ("error: cannot compare: the server did not report "
                                           "the runs' environments\n")
    finally:
        server.shutdown()
        server.server_close()


def test_the_gate_knows_the_servers_environment_states():
    assert {gate_module.CHANGED, gate_module.UNKNOWN} == set(environments.DIFFERS)
