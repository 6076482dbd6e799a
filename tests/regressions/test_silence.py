"""Stopped reporting: devices and series that went silent."""

from datetime import UTC, datetime, timedelta

import pytest

from benchsite.regressions import notify
from benchsite.regressions.models import NotificationTarget, SilenceAlert
from benchsite.regressions.silence import check_stopped_reporting
from tests.regressions.factory import DAY, H100, START, record, upload

pytestmark = pytest.mark.django_db
A100 = "NVIDIA A100-SXM4-80GB"


def at(night: float) -> datetime:
    return datetime.fromtimestamp(START + night * DAY, tz=UTC)


@pytest.fixture
def two_devices():
    for night in range(12):
        models = ["kept", "dropped"] if night < 6 else ["kept"]
        upload(night, [record(model, [1.0]) for model in models], job=0)
        if night < 9:  # the A100 runner stops after night 8
            upload(night, [record("kept", [1.0], arch=A100)], job=1)


def test_a_silent_device_and_a_silent_series_are_alerts_raised_once(two_devices, webhook):
    NotificationTarget.objects.create(name="hook", kind="webhook", url=webhook.url)
    alerts = check_stopped_reporting(now=at(11.5))
    assert {(a.arch, a.series.model if a.series else None) for a in alerts} == {
        (A100, None), (H100, "dropped")}
    device = next(a for a in alerts if a.series is None)
    assert device.last_seen == at(8) + timedelta(seconds=60)  # job 1 of night 8
    assert device.usual_gap.total_seconds() == DAY and device.runs_seen == 9
    assert notify.notify_silences(alerts) == 2
    [(_, payload)] = webhook.received
    assert payload["event"] == "stopped_reporting"
    assert {item["series"] is None for item in payload["items"]} == {True, False}

    assert check_stopped_reporting(now=at(11.6)) == []  # the same silences
    assert notify.notify_silences(alerts) == 0
    assert SilenceAlert.objects.filter(resolved_at__isnull=True).count() == 2


def test_a_device_that_reports_again_resolves_its_alert(two_devices):
    [device] = [a for a in check_stopped_reporting(now=at(11.5)) if a.series is None]
    upload(12, [record("kept", [1.0], arch=A100)], job=1)
    assert check_stopped_reporting(now=at(12.5)) == []
    device.refresh_from_db()
    assert device.resolved_at == at(12.5)


def test_short_gaps_and_short_histories_are_not_silences(two_devices):
    # The A100: silent for 2.5 usual gaps.
    assert [a for a in check_stopped_reporting(now=at(10.5)) if a.series is None] == []
    upload(0, [record("new", [1.0], arch="NVIDIA L4")], repo="other/repo")
    assert all(a.arch != "NVIDIA L4" for a in check_stopped_reporting(now=at(30)))
