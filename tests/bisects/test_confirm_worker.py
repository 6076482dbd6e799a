"""Confirming before alerting on a real `celery worker` (the embedded filesystem broker,
no service): the demo's slowdown, measured by a job, is confirmed by its A/B try job on
the worker, which then bisects it, and one webhook message names the culprit."""

from __future__ import annotations

import time

import pytest

from benchsite.access.models import AllowedCodeModule
from benchsite.bisects.models import Bisect, Source
from benchsite.regressions import confirmation
from benchsite.regressions.models import DetectionSettings, NotificationTarget, Regression
from runner.sources import demo
from tests.bisects.test_confirm_demo import measured
from tests.jobs.conftest import sending_to, start_worker, stop_worker, wait_for
from tests.regressions.conftest import webhook  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.torch, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(transactional_db, tmp_path):
    """A worker on the filesystem broker (queues cpu and control) with its own source cache;
    tasks sent by the test go to it."""
    from benchsite.celery import filesystem_broker

    folder, broker = tmp_path / "broker", "filesystem://localhost/"
    started = start_worker(broker, name="confirm", CELERY_BROKER_FOLDER=folder,
                           BENCH_SOURCE_CACHE=tmp_path / "sources")
    try:
        with sending_to(broker, **filesystem_broker(folder)):
            yield started
    finally:
        stop_worker(started)


def test_a_worker_confirms_bisects_and_tells_once_with_the_culprit(
        worker, webhook, demo_repo, settings):  # noqa: F811
    path, shas = demo_repo
    AllowedCodeModule.objects.create(module="demopkg")
    source = Source.objects.create(name="demo", location=str(path), repo="demo/pkg",
                                   mode="command", build_command=demo.BUILD_COMMAND)
    settings.BENCH_DETECT_ON_UPLOAD = False  # the history below is made, not detected
    DetectionSettings.load()
    DetectionSettings.objects.filter(pk=1).update(confirm_auto_bisect=True)
    NotificationTarget.objects.create(name="hook", kind="webhook", url=webhook.url + "/hook")
    regression = measured(source, shas[demo.SLOW - 1], shas[demo.SLOW + 1])

    confirmation.request([regression])  # queues the try job on the worker's queue
    regression.refresh_from_db()
    assert regression.confirmation == Regression.Confirmation.PENDING
    assert webhook.received == []

    def notified():
        """the regression told"""
        return Regression.objects.filter(pk=regression.pk, notified_at__isnull=False).first()

    told = wait_for(notified, timeout=900, interval=1)
    assert told.confirmation == Regression.Confirmation.CONFIRMED, told.confirmation_note
    bisect = Bisect.objects.get(kind=Bisect.Kind.BISECT)
    assert bisect.state == "culprit" and bisect.culprit_sha == shas[demo.SLOW]
    assert Bisect.objects.get(confirms=True).state == "finished"
    time.sleep(2)  # a second message (the culprit's own) would have been sent by now
    [(path, payload)] = webhook.received
    assert payload["event"] == "regressions"
    item = payload["items"][0]
    assert item["confirmation"] == "confirmed" and item["culprit"]["sha"] == shas[demo.SLOW]
