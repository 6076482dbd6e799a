"""Confirming before alerting on the demo repository (issue 32's demo), through the Celery
tasks (eager): a slowdown measured by a job and present in the code is confirmed by its A/B
try job, bisected, and told once, naming the culprit; one injected into the history only is
not reproduced, told to nobody and marked false positive."""

from __future__ import annotations

import pytest

from benchsite.bisects.models import Bisect
from benchsite.jobs.models import Job, JobCell
from benchsite.regressions import confirmation, notify
from benchsite.regressions.models import DetectionSettings, NotificationTarget, Regression
from benchsite.results.models import Run, Series
from runner.sources import demo
from tests.bisects.test_start import KEY
from tests.regressions.factory import make_regression, record, sha, upload

pytestmark = [pytest.mark.torch, pytest.mark.once]
C = Regression.Confirmation


@pytest.fixture
def sent(monkeypatch, db):
    payloads = []
    monkeypatch.setattr(notify, "post_json", lambda url, payload: payloads.append(payload) or 200)
    NotificationTarget.objects.create(name="hook", kind="webhook", url="https://h.example/x",
                                      repo="demo/*")
    return payloads


def measured(source, good: str, bad: str) -> Regression:
    """A 3x step in the history of the demo spec's series between two of the demo's commits,
    its bad end measured by a job of the demo spec."""
    for night, level in enumerate((1.0, 1.0, 1.0, 3.0, 3.0)):
        upload(night, [record("demo_mlp", [level] * 3, metric=(demo.METRIC, "ms"))],
               repo="demo/pkg")
    job = Job.objects.create(name="demo.yml", family="compilers", spec_yaml=demo.SPEC,
                             queue="cpu", submitted_via="api", repo="demo/pkg",
                             head_branch="main", head_sha=bad)
    bad_run = Run.objects.get(repo="demo/pkg", head_sha=sha(3))
    JobCell.objects.create(job=job, index=0, key=KEY, cell={"model": "demo"},
                           upload=bad_run.upload)
    regression = make_regression(Series.objects.get(repo="demo/pkg"), 3, magnitude=2.0)
    Regression.objects.filter(pk=regression.pk).update(last_good_sha=good, first_bad_sha=bad)
    regression.refresh_from_db()
    return regression


def test_a_slowdown_in_the_code_is_confirmed_bisected_and_told_once_with_its_culprit(
        source, demo_repo, sent, django_capture_on_commit_callbacks):
    _, shas = demo_repo
    DetectionSettings.load()
    DetectionSettings.objects.filter(pk=1).update(confirm_auto_bisect=True)
    regression = measured(source, shas[demo.SLOW - 1], shas[demo.SLOW + 1])
    with django_capture_on_commit_callbacks(execute=True):
        confirmation.request([regression])
        notify.notify_regressions([regression])
    regression.refresh_from_db()
    ab = Bisect.objects.get(confirms=True)
    assert ab.state == "finished", ab.outcome
    assert regression.confirmation == C.CONFIRMED, regression.confirmation_note
    assert regression.confirmation_note.endswith(f"A/B try job {ab.pk}")
    bisect = Bisect.objects.get(kind=Bisect.Kind.BISECT)
    assert bisect.state == "culprit" and bisect.culprit_sha == shas[demo.SLOW]
    [payload] = sent  # one message, the alert, naming the culprit
    item = payload["items"][0]
    assert item["confirmation"] == "confirmed" and item["culprit"]["sha"] == shas[demo.SLOW]
    assert regression.state == "open" and regression.held_until is None


def test_a_slowdown_only_in_the_history_is_not_reproduced_told_to_none_and_invalid(
        source, demo_repo, sent, django_capture_on_commit_callbacks):
    _, shas = demo_repo
    regression = measured(source, shas[2], shas[3])
    with django_capture_on_commit_callbacks(execute=True):
        confirmation.request([regression])
        notify.notify_regressions([regression])
    regression.refresh_from_db()
    assert Bisect.objects.get().state == "finished"
    assert regression.confirmation == C.NOT_REPRODUCED, regression.confirmation_note
    assert regression.state == Regression.State.FALSE_POSITIVE
    assert regression.events.order_by("-pk").first().note.startswith("not reproduced: ")
    assert sent == [] and not Bisect.objects.filter(kind=Bisect.Kind.BISECT).exists()
