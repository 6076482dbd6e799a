"""`python -m runner gate` against a live server."""

import socket

import pytest

from runner.cli import main
from tests.regressions.factory import record, sha, upload

pytestmark = pytest.mark.django_db(transaction=True)
HOSTILE = "<img src=x onerror=alert(1)>|`x`"


@pytest.fixture
def commits():
    upload(1, [record("steady", [1.0, 1.0, 1.0]), record(HOSTILE, [1.0, 1.01, 0.99, 1.0])])
    upload(2, [record("steady", [1.0, 1.01, 0.99]), record(HOSTILE, [1.5, 1.51, 1.49, 1.5])])
    upload(3, [record("steady", [1.0, 1.0, 1.0]), record(HOSTILE, [1.49, 1.5, 1.5, 1.51])])


def gate(server: str, base: int, head: int, *extra: str) -> int:
    return main(["gate", "--server", server, "--repo", "pytorch/ao", "--base", sha(base),
                 "--head", sha(head), *extra])


def test_a_regression_fails_the_gate_with_a_markdown_summary(live_server, commits, capsys):
    assert gate(live_server.url, 1, 2) == 1
    out = capsys.readouterr().out
    assert "**Verdict: regressed** — 1 regressed, 0 improved" in out
    assert "#### Regressions" in out and "+50.0 %" in out
    assert "| &lt;img src=x onerror=alert(1)&gt;\\|\\`x\\` |" in out  # inert in a comment
    assert "<img" not in out
    assert (f"[Full comparison]({live_server.url}/compare/{sha(1)}...{sha(2)}"
            f"?repo=pytorch%2Fao)") in out


def test_no_regression_passes_and_fail_on_chooses_what_fails(live_server, commits, capsys):
    assert gate(live_server.url, 2, 3) == 0
    assert "**Verdict: unchanged**" in capsys.readouterr().out
    assert gate(live_server.url, 1, 2, "--model", "steady") == 0
    assert gate(live_server.url, 2, 1, "--fail-on", "improved,regressed") == 1


def test_usage_and_connection_errors_exit_2(live_server, commits, capsys):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    assert gate(f"http://127.0.0.1:{port}", 1, 2) == 2
    assert "error: http://127.0.0.1" in capsys.readouterr().err
    assert main(["gate", "--server", live_server.url, "--repo", "", "--base", sha(1),
                 "--head", sha(2)]) == 2
    err = capsys.readouterr().err
    assert "HTTP 400" in err and "repo: required" in err
    with pytest.raises(SystemExit) as usage:
        gate(live_server.url, 1, 2, "--fail-on", "worse")
    assert usage.value.code == 2
