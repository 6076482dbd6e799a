"""`manage.py bench bisect` and `bench ab` on the demo repository (the task runs in-process
as each command starts it): exit codes, last lines, --json."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from benchsite.bisects.models import Bisect, Source
from runner.sources import demo

pytestmark = [pytest.mark.torch, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def spec(tmp_path, settings):
    settings.BENCH_SOURCE_CACHE = str(tmp_path / "sources")
    path = tmp_path / "demo.yml"
    path.write_text(demo.SPEC)
    from benchsite.access.models import AllowedCodeModule

    AllowedCodeModule.objects.create(module="demopkg")
    return path


def test_a_range_without_a_change_is_not_reproduced_exit_3(spec, demo_repo, settings, capsys):
    settings.BENCH_BISECT_MIN_CHANGE = 0.5  # the demo's change is ~30x; the machine's noise not
    settings.BENCH_BISECT_MAX_ROUNDS = 2
    path, shas = demo_repo
    with pytest.raises(CommandError) as ended:
        call_command("bench", "bisect", "--spec", str(spec), "--source", str(path),
                     "--good", shas[1], "--bad", shas[5], "--wait", "--json")
    assert ended.value.returncode == 3
    out = json.loads(capsys.readouterr().out)
    assert out["state"] == "not_reproduced" and out["culprit_sha"] == ""
    assert [step["sha"] for step in out["steps"]] == [shas[1], shas[5]]
    assert all(len(step["values"]) >= 6 and step["verdict"] == "good"
               for step in out["steps"])
    # The operator's path became a source in pythonpath mode, reused the next time.
    made = Source.objects.get()
    assert made.mode == "pythonpath" and made.location == str(path.resolve())
    assert made.repo == "local/repo"


def test_bench_ab_runs_both_refs_interleaved(spec, demo_repo, capsys, client):
    # The default 3 rounds: with 2 pairs of rounds their t-test has one degree of freedom,
    # and a busy machine's rounds (0.3 -> 5.9 beside 0.5 -> 5.9) leave a 20x change at p > 0.05.
    path, shas = demo_repo
    Source.objects.create(name="demo", location=str(path), repo="demo/pkg")
    call_command("bench", "ab", "--spec", str(spec), "--source", "demo",
                 "--base", shas[demo.SLOW - 1], "--head", shas[demo.SLOW], "--wait")
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == (f"finished: compare {shas[demo.SLOW - 1][:12]}..."
                         f"{shas[demo.SLOW][:12]}")
    latency = next(line for line in lines if "· abs_latency:" in line)
    assert "significant" in latency
    ab = Bisect.objects.get()
    assert ab.kind == "ab" and [len(s.rounds) for s in ab.steps.all()] == [3, 3]
    [row] = [r for r in ab.outcome["series"] if r["series"].endswith("abs_latency")]
    assert row["change"] > 2 and row["p_value"] < 0.05
    assert f"p={row['p_value']:.2g}, significant" in latency  # the p that judged it
    page = client.get(ab.get_absolute_url()).content.decode()
    assert 'id="compare-link"' in page and f"/compare/{shas[demo.SLOW - 1]}..." in page
    assert client.get(ab.get_absolute_url(), {"format": "json"}).json()["figures"][0][
        "data"][0]["type"] == "box"


def test_bad_options_are_named(spec, demo_repo):
    with pytest.raises(CommandError, match=r"missing: --good, --bad"):
        call_command("bench", "bisect", "--spec", str(spec), "--source", str(demo_repo[0]))
    with pytest.raises(CommandError, match="--regression 99: no such regression"):
        call_command("bench", "bisect", "--regression", "99")
    with pytest.raises(CommandError, match="source 'nowhere': no such source"):
        call_command("bench", "bisect", "--spec", str(spec), "--source", "nowhere",
                     "--good", "a", "--bad", "b")
