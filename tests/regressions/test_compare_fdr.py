"""The comparison's false discovery rate: `DetectionSettings.compare_fdr`, a request's
`?fdr=`, the gate's `--fdr`; and the cache of comparisons, which never mixes two rates."""

import math

import numpy as np
import pytest
from django.core.exceptions import ValidationError

from benchsite.comparison import judge
from benchsite.regressions.comparisons import compare_commits, recent_comparison
from benchsite.regressions.models import DetectionSettings
from runner.cli import main
from tests.regressions.factory import levels, record, sha, upload

NIGHTS, QUIET = 30, 29  # history nights; quiet series beside the one that moves
TARGET_P = 1e-3  # the moved series' p-value: 30 series make its adjusted p ~0.03


def _head_for(history: list[float]) -> float:
    """A head (lower is better, so a regression) whose p-value against `history` is about
    TARGET_P and whose change is past the 5 % tolerance."""
    rules = judge.Rules(tolerance=0.05)
    found = judge.baseline(np.array(history))
    low, high = 1.0, 3.0
    for _ in range(60):  # the p-value falls as the head moves up
        middle = (low + high) / 2
        verdict = judge.judge([history[-1]], [found.level * middle], found, "lower", rules)
        low, high = (middle, high) if verdict.p_value > TARGET_P else (low, middle)
    assert high > 1.06, "the moved series is too quiet for the test"
    return round(found.level * high, 6)


@pytest.fixture
def isolated_change():
    """NIGHTS nights of one noisy series (3 %) and QUIET quiet ones (1 %), then a head
    where only the noisy one moved, by about 3.3x its noise: the comparison is
    (sha(NIGHTS - 1), sha(NIGHTS))."""
    moved = [values[0] for values in levels(NIGHTS, noise=0.03, repetitions=1, seed=7)]
    quiet = {f"q{n}": [values[0] for values in levels(NIGHTS, noise=0.01, repetitions=1,
                                                        seed=100 + n)]
             for n in range(QUIET)}
    for night in range(NIGHTS):
        upload(night, [record("moved", [moved[night]])]
               + [record(model, [values[night]]) for model, values in quiet.items()])
    upload(NIGHTS, [record("moved", [_head_for(moved)])]
           + [record(model, [values[-1]]) for model, values in quiet.items()])
    return sha(NIGHTS - 1), sha(NIGHTS)


def _moved(comparison):
    return next(row for row in comparison.rows if row.model == "moved")


@pytest.mark.django_db
def test_the_setting_decides_whether_an_isolated_change_is_a_regression(isolated_change):
    base, head = isolated_change
    default = compare_commits("pytorch/ao", base, head)
    assert default.fdr == judge.Rules.fdr == 0.005
    row = _moved(default)
    assert row.state == "noisy" and "needs 0.005" in row.rule, row.rule
    assert default.verdict == "unchanged"

    settings = DetectionSettings.load()
    settings.compare_fdr = 0.25
    settings.full_clean()
    settings.save()
    loose = compare_commits("pytorch/ao", base, head)
    assert loose.fdr == 0.25
    assert _moved(loose).state == "regression", _moved(loose).rule
    assert loose.verdict == "regression"
    assert [row.model for row in loose.rows if row.state == "regression"] == ["moved"]
    # An explicit rate wins over the setting.
    assert _moved(compare_commits("pytorch/ao", base, head, fdr=0.005)).state == "noisy"


@pytest.mark.django_db
def test_the_api_takes_a_rate_and_refuses_a_bad_one_by_name(isolated_change, api):
    base, head = isolated_change
    params = {"repo": "pytorch/ao", "base": base, "head": head}
    default = api.get("/api/v3/compare", params).json()
    assert (default["fdr"], default["verdict"]) == (0.005, "unchanged")
    loose = api.get("/api/v3/compare", {**params, "fdr": "0.25"})
    assert loose.status_code == 200
    body = loose.json()
    assert (body["fdr"], body["verdict"], body["counts"]["regression"]) == (
        0.25, "regression", 1)
    assert body["rows"][0]["model"] == "moved"
    for bad in ("0", "0.5", "-0.1", "nan", "inf", "x", ""):
        refused = api.get("/api/v3/compare", {**params, "fdr": bad})
        assert refused.status_code == 400, bad
        errors = refused.json()["errors"]
        assert len(errors) == 1 and errors[0].startswith("fdr: "), errors
        assert "at most 0.25" in errors[0]


@pytest.mark.django_db
def test_the_cache_never_mixes_rates(isolated_change, api):
    base, head = isolated_change
    assert _moved(recent_comparison("pytorch/ao", base, head)).state == "noisy"
    assert _moved(recent_comparison("pytorch/ao", base, head, fdr=0.25)).state == "regression"
    assert _moved(recent_comparison("pytorch/ao", base, head)).state == "noisy"
    assert recent_comparison("pytorch/ao", base, head, fdr=0.25) is \
        recent_comparison("pytorch/ao", base[:8], head, fdr=0.25)  # kept, by the rate
    # The setting's rate is in the key too: a changed setting is not answered from the cache.
    DetectionSettings.objects.filter(pk=1).update(compare_fdr=0.25)
    assert _moved(recent_comparison("pytorch/ao", base, head)).state == "regression"
    params = {"repo": "pytorch/ao", "base": base, "head": head}
    assert api.get("/api/v3/compare", {**params, "fdr": "0.005"}).json()["verdict"] == \
        "unchanged"
    assert api.get("/api/v3/compare", params).json()["verdict"] == "regression"


@pytest.mark.django_db
def test_clean_refuses_a_rate_out_of_bounds_naming_the_field():
    settings = DetectionSettings.load()
    for bad in (0.0, 0.5, -0.01, math.nan):
        settings.compare_fdr = bad
        with pytest.raises(ValidationError) as refused:
            settings.clean()
        assert "compare_fdr" in refused.value.message_dict, bad
    for good in (0.25, 0.05, 1e-4):
        settings.compare_fdr = good
        settings.clean()
    field = DetectionSettings._meta.get_field("compare_fdr")
    assert field.default == judge.Rules.fdr
    assert "?fdr=" in field.help_text


@pytest.mark.django_db(transaction=True)
def test_the_gate_passes_its_rate_and_says_which(live_server, isolated_change, capsys):
    base, head = isolated_change

    def gate(*extra: str) -> tuple[int, str]:
        code = main(["gate", "--server", live_server.url, "--repo", "pytorch/ao",
                     "--base", base, "--head", head, *extra])
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    code, out = gate("--runs", "1")  # one run, judged as it stands
    assert code == 0 and "**Verdict: unchanged**" in out
    assert "false discovery rate 0.005 over the series compared" in out
    code, out = gate("--fdr", "0.25")
    assert code == 1 and "**Verdict: regression** — 1 regression" in out
    assert "false discovery rate 0.25 over the series compared" in out
    assert "| moved (inference, int8dq) |" in out
    for bad in ("0", "0.5", "x"):
        with pytest.raises(SystemExit) as usage:
            gate("--fdr", bad)
        assert usage.value.code == 2
        err = capsys.readouterr().err
        assert "--fdr" in err and "at most 0.25" in err, err
    for bad in ("0", "1.5", "x"):  # --confirm is a screen: up to 1
        with pytest.raises(SystemExit) as usage:
            gate("--confirm", bad)
        assert usage.value.code == 2 and "at most 1" in capsys.readouterr().err


def test_the_gate_knows_the_servers_bounds():
    from runner.cli import gate

    assert gate.MAX_FDR == judge.MAX_FDR


@pytest.mark.django_db
def test_the_page_names_the_rate_it_judged_with(isolated_change, client):
    base, head = isolated_change
    url = f"/compare/{base}...{head}?repo=pytorch/ao"
    assert "false discovery rate 0.50% over" in client.get(url).content.decode()
    settings = DetectionSettings.load()
    settings.compare_fdr = 0.25
    settings.save()
    page = client.get(url)
    assert "false discovery rate 25% over" in page.content.decode()
    assert client.get(url + "&format=json").json()["filters"]["fdr"] == 0.25


@pytest.mark.django_db
def test_the_page_judges_at_the_rate_its_url_names_and_resets_a_bad_one(isolated_change,
                                                                         client):
    base, head = isolated_change
    url = f"/compare/{base}...{head}?repo=pytorch/ao"
    loose = client.get(url + "&fdr=0.25").content.decode()
    assert "false discovery rate 25% over" in loose and "fdr=0.25" in loose  # links keep it
    assert '<input type="hidden" name="fdr" value="0.25">' in loose  # and so do the filters
    assert client.get(url + "&fdr=0.25&format=json").json()["filters"]["verdict"] == \
        "regression"
    bad = client.get(url + "&fdr=0.5").content.decode()
    assert "is not a false discovery rate" in bad and "false discovery rate 0.50% over" in bad
    refused = client.get(url + "&fdr=0.5&format=json")
    assert refused.status_code == 400 and "fdr" in refused.content.decode()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("again", ["moved", "back"])
def test_the_gate_asks_for_another_run_and_judges_the_runs_together(live_server,
                                                                    isolated_change, capsys,
                                                                    again):
    from benchsite.results.models import Result

    base, head = isolated_change
    stored = dict(Result.objects.filter(run__head_sha=head)
                  .values_list("series__model", "value"))
    level = float(np.median([r for r in Result.objects.filter(series__model="moved")
                             .exclude(run__head_sha=head).values_list("value", flat=True)]))

    def gate(*extra: str) -> tuple[int, str]:
        code = main(["gate", "--server", live_server.url, "--repo", "pytorch/ao",
                     "--base", base, "--head", head, *extra])
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    code, out = gate()
    assert code == 4, out  # noisy at the gate's 0.005, a regression at 0.4: run again
    assert "#### Run again" in out
    assert "| moved (inference, int8dq) |" in out.split("#### Run again")[1]
    assert "**Verdict: unchanged**" in out
    assert gate("--runs", "1")[0] == 0  # one run is all this CI gives: judged as it stands
    assert gate("--confirm", "0.001")[0] == 0  # a stricter rate would not fail it: no ask
    for job in (1, 2):  # CI runs the head twice more: the same change, or noise gone
        moved = stored["moved"] if again == "moved" else level
        upload(NIGHTS, [record(model, [moved if model == "moved" else value])
                        for model, value in stored.items()], job=job)
    code, out = gate()
    if again == "moved":
        assert code == 1 and "**Verdict: regression** — 1 regression" in out, out
        assert "over 3 runs" in out
    else:
        assert code == 0 and "#### Run again" not in out, out
    with pytest.raises(SystemExit) as usage:
        gate("--runs", "0")
    assert usage.value.code == 2 and "--runs" in capsys.readouterr().err
