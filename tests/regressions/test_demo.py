"""The demo's injected changes are what detection finds, one group each, the gate passes its
quiet nights, and its outage is an alert."""

from collections import Counter
from datetime import timedelta

import pytest
from django.core.management import call_command

from benchsite.regressions.comparisons import compare_commits
from benchsite.regressions.models import AlertGroup, Regression
from benchsite.regressions.silence import check_stopped_reporting
from benchsite.results.demo import injected, sha
from benchsite.results.models import Run

pytestmark = pytest.mark.django_db


def test_each_injected_change_is_one_group_and_nothing_else_is_raised(capsys):
    call_command("load_demo", "--nights", "85")
    call_command("demo_regressions", "--nights", "85")  # exits 1 on a miss (CommandError)
    out = capsys.readouterr().out
    assert "injected: int8dq on H100 12% slower (night 60): 1 group(s)" in out
    assert ("    environment: torch 2.13.0.dev20260928 -> 2.13.0.dev20260929; cuda, gpu unchanged"
            in out)
    labelled = Regression.objects.filter(environment_change__isnull=False)
    assert {(r.series.dtype, r.first_bad_sha) for r in labelled} == {("float8wo", sha(30))}
    assert (f"gate: python -m runner gate --server http://localhost:8000 --repo pytorch/ao "
            f"--base {sha(59)} --head {sha(60)}") in out  # to paste into the README's gate
    groups = AlertGroup.objects.all()
    assert len(groups) == len(injected(85)) == 7  # at most 10
    night = {sha(n): n for n in range(85)}
    found = Counter()
    for r in Regression.objects.select_related("series"):
        s = r.series
        family = (s.dtype or s.backend, s.arch.split()[1], r.kind, r.detector,
                  night[r.first_bad_sha])
        found[family if s.dtype != "float8dq-row" else (*family, s.model.split("-")[-3])] += 1
    int4wo = {key: n for key, n in found.items() if key[0] == "int4wo-128"}
    # A group of other commits (bench demo-bisect's repo, an upload) is not the demo's.
    AlertGroup.objects.create(repo="demo/pkg", branch="main", first_bad_sha="f" * 40,
                              first_bad_at=groups[0].first_bad_at)
    call_command("demo_regressions", "--nights", "85")
    assert "1 group(s) of commits outside the demo's history" in capsys.readouterr().out
    assert set(int4wo) == {("int4wo-128", "A100-SXM4-80GB", "improvement", "changepoint", 40)}
    assert int4wo[next(iter(int4wo))] >= 36  # of 40, aligned to the group's night
    assert {key: n for key, n in found.items() if key[0] != "int4wo-128"} == {
        ("float8wo", "H100", "regression", "changepoint", 30): 40,  # the torch nightly
        ("int8dq", "H100", "regression", "changepoint", 60): 40,  # speedup and time, 20 shapes
        ("float8dq-row", "H100", "regression", "changepoint", 75, "1024"): 20,
        ("amp", "H100", "regression", "changepoint", 70): 8,  # TorchInductor, huggingface
        ("amp", "H100", "regression", "accuracy", 80): 2,  # timm_model_03, both modes
        ("eager", "Xeon(R)", "regression", "changepoint", 82): 1,  # instruction count +3 %
    }


def test_two_quiet_demo_nightlies_pass_the_gate_and_the_injected_step_fails_it():
    call_command("load_demo", "--nights", "64")
    for base in (61, 62):  # after the step, on consecutive quiet nights
        assert compare_commits("pytorch/ao", sha(base), sha(base + 1)).verdict == "unchanged"
    for base in range(48, 58):
        assert compare_commits("pytorch/ao", sha(base), sha(base + 1)).verdict != \
            "regression", base
    stepped = compare_commits("pytorch/ao", sha(59), sha(60))
    assert stepped.verdict == "regression"
    assert {(row.dtype, row.arch) for row in stepped.rows if row.state == "regression"} == {
        ("int8dq", "NVIDIA H100 80GB HBM3")}


def test_the_demo_outage_of_the_a100_is_a_stopped_reporting_alert():
    call_command("load_demo", "--nights", "25")
    last = Run.objects.filter(head_sha=sha(19), arch__contains="A100").get().timestamp
    [alert] = check_stopped_reporting(now=last + timedelta(days=3, hours=12))
    assert (alert.series, alert.arch, alert.last_seen) == (None, "NVIDIA A100-SXM4-80GB", last)
    assert check_stopped_reporting(now=last + timedelta(days=2, hours=12)) == []
