"""Detection owed for an upload is retried a bounded number of times
(BENCH_DETECTION_MAX_ATTEMPTS): one that keeps failing is given up with its last error, shown
to operators in the admin's Uploads, instead of being queued again every period forever."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from benchsite.regressions import tasks
from benchsite.results.ingest import store_upload
from benchsite.results.models import Upload

BODY = (b'[{"benchmark": {"name": "b"}, "model": {"name": "m"}, '
        b'"metric": {"name": "latency", "benchmark_values": [1.0]}}]')
METADATA = {"repo": "pytorch/ao", "head_branch": "main", "head_sha": "a" * 40}
AN_HOUR = timedelta(hours=1)


@pytest.fixture
def retrying(settings):
    settings.BENCH_DETECT_ON_UPLOAD = True
    settings.BENCH_DETECTION_RETRY_AFTER = 600
    settings.BENCH_DETECTION_MAX_ATTEMPTS = 3
    return settings


@pytest.fixture
def upload_of(db, django_capture_on_commit_callbacks):
    """store_upload, with its on-commit detection run as after a real commit."""
    def store(head_sha: str = "a" * 40, **options) -> Upload:
        with django_capture_on_commit_callbacks(execute=True):
            upload = store_upload(BODY, metadata={**METADATA, "head_sha": head_sha},
                                  **options).upload
        upload.refresh_from_db()
        return upload

    return store


@pytest.fixture
def broken_detection(monkeypatch):
    def detect_runs(runs):
        raise RuntimeError("the series table is on fire")

    monkeypatch.setattr(tasks, "detect_runs", detect_runs)
    return monkeypatch


def overdue(upload: Upload) -> None:
    Upload.objects.filter(pk=upload.pk).update(detection_owed_at=timezone.now() - AN_HOUR)


def sweep() -> int:
    return tasks.detect_owed.apply().get()


def test_a_detection_that_always_fails_is_retried_then_given_up(
        retrying, upload_of, broken_detection, caplog):
    caplog.set_level(logging.WARNING, logger="benchsite.regressions.tasks")
    upload = upload_of()  # attempt 1: inline, on commit
    assert upload.detection_attempts == 1 and upload.detection_owed_at is not None
    assert "RuntimeError: the series table is on fire" in upload.detection_error
    assert sweep() == 0  # not overdue yet

    for attempt in (2, 3):
        overdue(upload)
        assert sweep() == 1
        upload.refresh_from_db()
        assert upload.detection_attempts == attempt
    assert upload.detection_owed_at is None  # given up at the third
    assert upload.detection_error.strip().endswith("RuntimeError: the series table is on fire")
    assert "Traceback" in upload.detection_error
    assert sweep() == 0
    upload.refresh_from_db()
    assert upload.detection_attempts == 3
    told = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == tasks.__name__]
    assert [message for level, message in told if "given up" in message] == [
        f"upload {upload.pk}: detection failed 3 times, given up (admin: Uploads, detection "
        "'given up'): RuntimeError: the series table is on fire"]
    assert [level for level, message in told if "given up" in message] == [logging.ERROR]
    assert sum(" of 3 failed" in message for level, message in told) == 2


def test_a_succeeding_detection_clears_the_fields(retrying, upload_of, broken_detection):
    upload = upload_of()
    assert upload.detection_attempts == 1 and upload.detection_error
    broken_detection.undo()
    overdue(upload)
    assert sweep() == 1
    upload.refresh_from_db()
    assert (upload.detection_owed_at, upload.detection_attempts, upload.detection_error) \
        == (None, 0, "")


def test_runs_that_never_finish_count_too(retrying, upload_of):
    """A worker killed in every run (out of memory) records no error, yet it is given up."""
    upload = upload_of(announce=False)
    Upload.objects.filter(pk=upload.pk).update(detection_attempts=3,
                                               detection_owed_at=timezone.now() - AN_HOUR)
    assert sweep() == 0
    upload.refresh_from_db()
    assert upload.detection_owed_at is None
    assert "none of its 3 detection runs finished" in upload.detection_error


def test_a_lost_task_is_not_an_attempt(retrying, upload_of, monkeypatch):
    """Queued while the broker is down, the task never ran: the upload stays owed, however
    often the sweeper tries."""
    upload = upload_of(announce=False)
    Upload.objects.filter(pk=upload.pk).update(detection_owed_at=timezone.now())

    class Unreachable:
        @staticmethod
        def delay(upload_id):
            raise ConnectionError("broker down")

    monkeypatch.setattr(tasks, "detect_upload", Unreachable)
    for _ in range(5):
        overdue(upload)
        assert sweep() == 1
    upload.refresh_from_db()
    assert upload.detection_owed_at is not None and upload.detection_attempts == 0


def test_operators_see_and_restart_given_up_detections(retrying, upload_of, broken_detection,
                                                     client):
    failing = upload_of()
    fine = upload_of("b" * 40, announce=False)
    client.force_login(User.objects.create_superuser("root"))
    changelist = reverse("admin:results_upload_changelist")
    failing_now = client.get(changelist, {"detection": "failing"})
    assert [u.pk for u in failing_now.context["cl"].result_list] == [failing.pk]
    assert "failed 1x, to be retried: RuntimeError" in failing_now.content.decode()
    for _ in range(2):
        overdue(failing)
        sweep()
    given_up = client.get(changelist, {"detection": "given_up"})
    assert [u.pk for u in given_up.context["cl"].result_list] == [failing.pk]
    assert "given up after 3 attempts: RuntimeError: the series table is on fire" \
        in given_up.content.decode()
    assert client.get(changelist, {"detection": "failing"}).context["cl"].result_count == 0
    assert fine.pk in [u.pk for u in client.get(changelist).context["cl"].result_list]
    detail = client.get(reverse("admin:results_upload_change", args=[failing.pk]))
    assert "the series table is on fire" in detail.content.decode()

    broken_detection.undo()
    client.post(changelist, {"action": "detect_again", "_selected_action": [failing.pk]})
    failing.refresh_from_db()
    assert failing.detection_attempts == 0 and failing.detection_error == ""
    assert sweep() == 1  # the next sweep takes it at once
    failing.refresh_from_db()
    assert failing.detection_owed_at is None and failing.detection_error == ""
