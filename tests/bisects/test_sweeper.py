"""The bisect sweeper (benchsite.bisects.tasks.sweep, on celery beat): bisects whose worker
was lost are queued again up to MAX_ATTEMPTS, then failed saying why; pending ones whose
task was never sent, or sent and never taken, are sent (again); times are set on the rows,
never waited for."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from benchsite.bisects import tasks
from benchsite.bisects.models import Bisect
from benchsite.bisects.start import start_spec
from benchsite.results.models import Upload
from runner.sources import demo
from tests.jobs.conftest import sending_to

pytestmark = pytest.mark.django_db
UNREACHABLE = "redis://127.0.0.1:9/0"
AN_HOUR_AGO = timedelta(hours=1)


@pytest.fixture
def sent(monkeypatch):
    """The bisects whose task was sent (to no worker)."""
    ids = []
    monkeypatch.setattr(tasks.run_bisect, "apply_async",
                        lambda args, queue: ids.append(args[0]))
    return ids


def make(source, **fields) -> Bisect:
    bisect = Bisect.objects.create(
        source=source, spec_name="demo.yml", spec_yaml=demo.SPEC, family="compilers",
        cells=[{"key": "k", "cell": {}}], good_ref="a", bad_ref="b")
    Bisect.objects.filter(pk=bisect.pk).update(**fields)
    return Bisect.objects.get(pk=bisect.pk)


def lost(source, attempts=1, ran=timedelta(minutes=5), worker="gone@elsewhere pid 1",
         **fields) -> Bisect:
    """A bisect whose worker died an hour ago, `ran` into it."""
    started = timezone.now() - AN_HOUR_AGO
    return make(source, state="running", attempts=attempts, worker=worker,
                started_at=started, heartbeat_at=started + ran,
                enqueued_at=started - timedelta(seconds=1), **fields)


def test_a_bisect_whose_worker_was_lost_is_queued_again(source, sent):
    bisect = lost(source)
    alive = make(source, state="running", attempts=1, worker="here pid 2",
                 started_at=timezone.now() - AN_HOUR_AGO, heartbeat_at=timezone.now())
    done = tasks.sweep()
    assert done["bisects queued again, their worker lost"] == 1 and sent == [bisect.pk]
    bisect.refresh_from_db()
    assert bisect.state == "pending" and bisect.enqueued_at is not None
    assert bisect.progress.startswith("attempt 1: worker gone@elsewhere pid 1 lost (no "
                                      "heartbeat since ")
    assert Bisect.objects.get(pk=alive.pk).state == "running"  # its heartbeat is fresh
    assert tasks.sweep() == dict.fromkeys(done, 0) and sent == [bisect.pk]  # sent once

    # the worker that takes it claims it: attempt 2
    claimed = tasks.claim(bisect.pk, "next@host pid 3")
    assert claimed.state == "running" and claimed.attempts == 2


def test_a_bisect_run_in_process_by_a_live_process_is_left_alone(source, sent):
    """`bench bisect` without a broker runs it in its own process, which writes no
    heartbeat; a beat beside it (scripts/run's) must not send it to a worker too."""
    running = lost(source, worker=tasks.in_process())  # this test's process: alive
    dead = lost(source, worker=tasks.in_process().rsplit(" pid ", 1)[0] + " pid 999999999")
    assert tasks.sweep()["bisects queued again, their worker lost"] == 1 and sent == [dead.pk]
    assert Bisect.objects.get(pk=running.pk).state == "running"


def test_after_max_attempts_a_lost_bisect_is_failed_with_the_reason(source, sent):
    bisect = lost(source, attempts=tasks.MAX_ATTEMPTS, outcome={"skipped": []})
    assert tasks.sweep()["bisects failed after lost workers"] == 1 and sent == []
    bisect.refresh_from_db()
    assert bisect.state == "failed" and bisect.finished_at is not None
    assert bisect.outcome == {"skipped": [], "message": (
        "gave up after 3 attempts: each time the worker running it was lost (crash, out of "
        "memory or killed; the last: gone@elsewhere pid 1)")}

    # a message the broker delivers once more after that many lost workers is failed too
    again = lost(source, attempts=tasks.MAX_ATTEMPTS)
    assert tasks.claim(again.pk, "next@host pid 3") is None
    again.refresh_from_db()
    assert again.state == "failed" and again.outcome["message"].startswith("gave up after 3")


def test_a_bisect_past_its_time_limit_is_failed_not_run_again(source, sent, settings):
    settings.BENCH_BISECT_TIME_LIMIT = 600
    bisect = lost(source, ran=timedelta(seconds=600))
    assert tasks.sweep()["bisects failed at the time limit"] == 1 and sent == []
    bisect.refresh_from_db()
    assert bisect.state == "failed"
    assert bisect.outcome["message"] == ("time limit: killed at the hard time limit of 600 s "
                                         "(BENCH_BISECT_TIME_LIMIT) on gone@elsewhere pid 1")


def test_a_bisect_never_queued_is_sent_once_the_broker_is_back(source, sent):
    just_started = make(source)  # its own enqueue follows its start's commit
    owed = make(source, created_at=timezone.now() - timedelta(minutes=1))
    assert tasks.sweep()["bisects queued from the outbox"] == 1 and sent == [owed.pk]
    assert Bisect.objects.get(pk=owed.pk).enqueued_at is not None
    assert Bisect.objects.get(pk=just_started.pk).enqueued_at is None


@pytest.mark.django_db(transaction=True)
def test_while_the_broker_is_down_the_sweeper_leaves_it_owed(source):
    owed = make(source, created_at=timezone.now() - timedelta(minutes=1))
    with sending_to(UNREACHABLE):
        assert tasks.sweep()["bisects queued from the outbox"] == 0
    owed.refresh_from_db()
    assert owed.state == "pending" and owed.enqueued_at is None
    assert owed.progress.startswith("not queued: the broker is unreachable")


def test_a_task_sent_long_ago_and_never_taken_is_sent_again(source, sent):
    recent = make(source, enqueued_at=timezone.now() - timedelta(minutes=10),
                  created_at=timezone.now() - timedelta(minutes=10))
    stale = make(source, enqueued_at=timezone.now() - tasks.RESEND_AFTER - timedelta(seconds=1),
                 created_at=timezone.now() - 2 * AN_HOUR_AGO)
    assert tasks.sweep()["bisects queued again, not taken"] == 1 and sent == [stale.pk]
    assert Bisect.objects.get(pk=recent.pk).enqueued_at < timezone.now() - timedelta(minutes=9)
    # sent twice, it still runs once: the second delivery finds it running on a live worker
    tasks.claim(stale.pk, f"w@h pid {os.getpid()}")
    assert tasks.claim(stale.pk, "other@h pid 1") is None


def test_a_bisect_pending_too_long_is_failed_saying_why(source, sent, settings):
    settings.BENCH_ENQUEUE_GIVE_UP = 3600
    long_ago = timezone.now() - 2 * AN_HOUR_AGO
    unqueued = make(source, created_at=long_ago)
    untaken = make(source, created_at=long_ago, enqueued_at=long_ago, queue="cuda")
    requeued = make(source, created_at=long_ago, started_at=long_ago, heartbeat_at=long_ago,
                    enqueued_at=long_ago, attempts=1)  # its worker was lost, then no other
    waiting = make(source, created_at=long_ago, started_at=timezone.now(),
                   enqueued_at=timezone.now())  # a worker was lost a moment ago
    assert tasks.sweep()["bisects failed, never taken"] == 3 and sent == []
    messages = {b.pk: b.outcome.get("message") for b in Bisect.objects.filter(state="failed")}
    assert messages == {
        unqueued.pk: "never ran: the broker could not take its task for 3600 s "
                     "(BENCH_ENQUEUE_GIVE_UP)",
        untaken.pk: "never ran: no worker of queue 'cuda' took its task for 3600 s "
                    "(BENCH_ENQUEUE_GIVE_UP)",
        requeued.pk: "never ran: no worker of queue 'cpu' took its task for 3600 s "
                     "(BENCH_ENQUEUE_GIVE_UP)"}
    assert Bisect.objects.get(pk=waiting.pk).state == "pending"


def test_the_sweep_runs_on_the_control_queue_on_beat():
    from benchsite.celery import app

    [entry] = [entry for entry in django_settings.CELERY_BEAT_SCHEDULE.values()
               if entry["task"] == "benchsite.bisects.tasks.sweep"]
    assert entry["schedule"] == django_settings.BENCH_SWEEP_INTERVAL
    route = app.amqp.router.route({}, tasks.sweep.name)
    assert route["queue"].name == django_settings.BENCH_CONTROL_QUEUE


@pytest.mark.torch
@pytest.mark.once
def test_a_bisect_killed_mid_step_is_finished_by_the_sweepers_requeue(
        source, demo_repo, django_capture_on_commit_callbacks, monkeypatch):
    """Its worker died during its third round; the heartbeat stopped; the sweeper queues
    it (in-process here: the task runs at once), the killed step runs again and the bisect
    ends with its culprit, nothing stored twice."""
    from benchsite.bisects import lab

    _, shas = demo_repo
    calls, real = [], lab.run_cells

    def dies_on_the_third_run(*args, **kwargs):
        calls.append(args[0].sha)
        if len(calls) == 3:
            raise SystemExit("worker killed")
        return real(*args, **kwargs)

    monkeypatch.setattr(lab, "run_cells", dies_on_the_third_run)
    with pytest.raises(SystemExit), django_capture_on_commit_callbacks(execute=True):
        start_spec(spec_yaml=demo.SPEC, spec_name="demo.yml", source=source,
                   good=shas[demo.SLOW - 1], bad=shas[demo.SLOW + 1])
    bisect = Bisect.objects.get()
    assert bisect.state == "running" and bisect.attempts == 1
    Bisect.objects.filter(pk=bisect.pk).update(  # its machine is gone: the beats stopped
        worker="gone@elsewhere pid 1", heartbeat_at=timezone.now() - AN_HOUR_AGO)

    assert tasks.sweep()["bisects queued again, their worker lost"] == 1
    bisect.refresh_from_db()
    assert bisect.state == "culprit" and bisect.attempts == 2, bisect.outcome
    assert bisect.culprit_sha == shas[demo.SLOW]
    assert calls[3] == calls[2]  # the killed step first
    keys = list(Upload.objects.filter(idempotency_key__startswith=f"bisect-{bisect.pk}-")
                .values_list("idempotency_key", flat=True))
    assert len(keys) == len(set(keys)) == sum(len(s.rounds) for s in bisect.steps.all())
