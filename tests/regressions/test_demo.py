"""The demo's injected changes are what the change-point detector finds, and its outage is
an alert."""

from collections import Counter
from datetime import timedelta

import pytest
from django.core.management import call_command

from benchsite.regressions.models import Regression
from benchsite.regressions.silence import check_stopped_reporting
from benchsite.results.demo import sha
from benchsite.results.models import Run

pytestmark = pytest.mark.django_db


def test_the_demo_changes_are_found_and_nothing_else(capsys):
    call_command("load_demo", "--nights", "85")  # (no on-commit detection in this test)
    call_command("detect_regressions")
    assert "new regressions" in capsys.readouterr().out
    night = {sha(n): n for n in range(85)}
    found = Counter()
    for r in Regression.objects.filter(detector="changepoint").select_related("series"):
        s = r.series
        family = (s.dtype or s.backend, s.arch.split()[1], r.kind, night[r.first_bad_sha])
        found[family if s.dtype != "float8dq-row" else (*family, s.model.split("-")[-3])] += 1
    int4wo = {key: n for key, n in found.items() if key[0] == "int4wo-128"}
    assert {key[:3] for key in int4wo} == {("int4wo-128", "A100-SXM4-80GB", "improvement")}
    assert sum(n for key, n in int4wo.items() if abs(key[3] - 40) <= 3) >= 36  # of 40
    assert {key: n for key, n in found.items() if key[0] != "int4wo-128"} == {
        ("int8dq", "H100", "regression", 60): 40,  # speedup and time, 20 shapes
        ("float8dq-row", "H100", "regression", 75, "1024"): 20,
        ("amp", "H100", "regression", 70): 8,  # TorchInductor on huggingface
        ("eager", "Xeon(R)", "regression", 82): 1,  # instruction count +3 %, 1 % minimum
    }


def test_the_demo_outage_of_the_a100_is_a_stopped_reporting_alert():
    call_command("load_demo", "--nights", "25")
    last = Run.objects.filter(head_sha=sha(19), arch__contains="A100").get().timestamp
    [alert] = check_stopped_reporting(now=last + timedelta(days=3, hours=12))
    assert (alert.series, alert.arch, alert.last_seen) == (None, "NVIDIA A100-SXM4-80GB", last)
    assert check_stopped_reporting(now=last + timedelta(days=2, hours=12)) == []
