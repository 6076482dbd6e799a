"""Bisecting the demo repository through the Celery task (eager): the culprit, the skipped
broken commit, the log2 bound, and a re-run that stores nothing twice."""

from __future__ import annotations

import math

import pytest

from benchsite.bisects.models import Bisect
from benchsite.bisects.start import start_spec
from benchsite.results.models import Result, Run, Upload
from runner.sources import demo

pytestmark = [pytest.mark.torch, pytest.mark.once]


def start(source, good, bad, capture, **options):
    with capture(execute=True):
        bisect = start_spec(spec_yaml=demo.SPEC, spec_name="demo.yml", source=source,
                            good=good, bad=bad, **options)
    bisect.refresh_from_db()
    return bisect


def test_bisect_finds_the_culprit_and_skips_the_broken_commit(
        source, demo_repo, django_capture_on_commit_callbacks):
    _, shas = demo_repo
    bisect = start(source, shas[0], shas[-1], django_capture_on_commit_callbacks)

    assert bisect.state == Bisect.State.CULPRIT, bisect.outcome
    assert bisect.culprit_sha == shas[demo.SLOW]
    culprit = bisect.outcome["culprit"]
    assert culprit["subject"] == f"model: compute the hidden layer {demo.SLOWDOWN} times"
    assert culprit["author"] == "Demo Author <demo@example.com>"
    assert culprit["url"] == f"https://git.example/demo/commit/{shas[demo.SLOW]}"
    assert culprit["magnitude"] > 1.0 and culprit["p_value"] < 0.05
    measured = [step for step in bisect.steps.all() if step.rounds]
    assert len(measured) <= math.ceil(math.log2(len(shas) - 1)) + 3
    skipped = bisect.outcome["skipped"]
    assert [entry["sha"] for entry in skipped] == [shas[demo.BROKEN + 1]]
    assert skipped[0]["failure"].startswith("does not build: the build command exited")
    assert "SyntaxError" in skipped[0]["failure"]
    # Every round is a run of its own on the bisect's branch, at its commit.
    rounds = sum(len(step.rounds) for step in measured)
    runs = Run.objects.filter(head_branch=f"bisect/{bisect.pk}")
    assert runs.count() == rounds
    assert set(runs.values_list("head_sha", flat=True)) == {step.sha for step in measured}
    assert Result.objects.filter(run__in=runs, series__metric=demo.METRIC).count() == rounds


def test_a_worker_killed_mid_step_runs_the_step_again_and_stores_nothing_twice(
        source, demo_repo, django_capture_on_commit_callbacks, monkeypatch):
    from benchsite.bisects import lab, tasks

    _, shas = demo_repo
    calls, real = [], lab.run_cells

    def dies_on_the_third_run(*args, **kwargs):
        calls.append(args[0].sha)
        if len(calls) == 3:
            raise SystemExit("worker killed")  # not an Exception: the task cannot record it
        return real(*args, **kwargs)

    monkeypatch.setattr(lab, "run_cells", dies_on_the_third_run)
    with pytest.raises(SystemExit):
        start(source, shas[demo.SLOW - 2], shas[demo.SLOW + 2],
              django_capture_on_commit_callbacks)
    bisect = Bisect.objects.get()
    assert bisect.state == Bisect.State.RUNNING
    stored = Upload.objects.filter(idempotency_key__startswith=f"bisect-{bisect.pk}-").count()
    assert stored == 2  # the ends; the third round died before its transaction

    tasks.run_bisect.delay(bisect.pk)  # delivered again (same process: it died "here")
    bisect.refresh_from_db()
    assert bisect.state == Bisect.State.CULPRIT and bisect.attempts == 2, bisect.outcome
    assert bisect.culprit_sha == shas[demo.SLOW]
    assert calls[3] == calls[2]  # the killed step ran again first
    rounds = sum(len(step.rounds) for step in bisect.steps.all())
    keys = list(Upload.objects.filter(idempotency_key__startswith=f"bisect-{bisect.pk}-")
                .values_list("idempotency_key", flat=True))
    assert len(keys) == len(set(keys)) == rounds == len(calls) - 1

    # The message delivered once more after the end (a worker lost before its ack), or a
    # replay of a bisect whose worker died after its last round: nothing is measured again.
    assert tasks.run_bisect.delay(bisect.pk).get().startswith("not runnable")
    Bisect.objects.filter(pk=bisect.pk).update(state=Bisect.State.RUNNING,
                                               worker="gone pid 1", heartbeat_at=None)
    Bisect.objects.filter(pk=bisect.pk).update(started_at=bisect.started_at.replace(year=2000))
    tasks.run_bisect.delay(bisect.pk)
    assert len(calls) == rounds + 1
    assert Upload.objects.filter(idempotency_key__startswith=f"bisect-{bisect.pk}-").count() \
        == rounds
    assert Bisect.objects.get(pk=bisect.pk).culprit_sha == shas[demo.SLOW]
