"""Confirming before alerting (issue 32), the regressions' side, with a fake starter in place
of the bisects app's A/B try jobs: the states, when notifications go (none while pending,
one once confirmed, none when not reproduced, "unconfirmed" after the time limit), the
false positive a not reproduced regression becomes, and the settings."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from benchsite.regressions import confirmation, notify, tasks
from benchsite.regressions.models import DetectionSettings, NotificationTarget, Regression
from benchsite.results.models import Series
from tests.regressions.factory import make_group, make_regression, record, upload

pytestmark = pytest.mark.django_db
C = Regression.Confirmation


@pytest.fixture
def sent(monkeypatch):
    """The webhook payloads sent, to one target of every repo."""
    payloads = []
    monkeypatch.setattr(notify, "post_json", lambda url, payload: payloads.append(payload) or 200)
    NotificationTarget.objects.create(name="hook", kind="webhook", url="https://h.example/x")
    return payloads


@pytest.fixture
def started(monkeypatch):
    """The regressions the (fake) starter queued a try job for."""
    queued = []
    monkeypatch.setattr(confirmation, "_starter", lambda r: queued.append(r.pk) or "")
    return queued


@pytest.fixture
def series(db):
    for night in range(6):  # a regression made at night 2 is raised at night 5
        upload(night, [record("m", [1.0] * 3), record("n", [1.0] * 3)])
    return Series.objects.get(model="m"), Series.objects.get(model="n")


def mode(name, **fields):
    DetectionSettings.load()
    DetectionSettings.objects.filter(pk=1).update(confirm_mode=name, **fields)


def raised(series, started):
    """A new regression, its confirmation asked and its notification tried (detect_upload)."""
    regression = make_regression(series, 2)
    confirmation.request([regression])
    notify.notify_regressions([regression])
    regression.refresh_from_db()
    return regression


def test_a_confirmed_regression_is_told_once_after_its_verdict(series, sent, started):
    mode("wait", confirm_time_limit_minutes=60)
    regression = raised(series[0], started)
    assert started == [regression.pk] and regression.confirmation == C.PENDING
    assert timedelta(minutes=59) < regression.held_until - timezone.now() <= timedelta(
        minutes=60)
    assert sent == [] and regression.notified_at is None  # waits

    assert confirmation.record(regression, C.CONFIRMED, "+20.0%, p=0.002, A/B try job 1")
    [payload] = sent
    item = payload["items"][0]
    assert item["id"] == regression.pk and item["confirmation"] == "confirmed"
    assert item["confirmation_note"] == "+20.0%, p=0.002, A/B try job 1"
    regression.refresh_from_db()
    assert regression.confirmation_text == "confirmed (+20.0%, p=0.002, A/B try job 1)"
    assert regression.held_until is None and regression.state == "open"
    # a verdict delivered again, the time limit, or detection's retry tell nothing more
    assert not confirmation.record(regression, C.CONFIRMED, "again")
    assert confirmation.release_overdue() == 0
    notify.notify_regressions([regression])
    assert len(sent) == 1


def test_not_reproduced_is_never_told_and_marked_false_positive_with_the_reason(
        series, sent, started):
    mode("wait")
    regression = raised(series[0], started)
    assert confirmation.record(regression, C.NOT_REPRODUCED, "+0.3%, p=0.8, A/B try job 2")
    regression.refresh_from_db()
    assert regression.state == Regression.State.FALSE_POSITIVE and regression.held_until is None
    event = regression.events.order_by("-pk").first()
    assert event.user is None and event.to_state == "false_positive"
    assert event.note == "not reproduced: +0.3%, p=0.8, A/B try job 2"
    assert regression.confirmation_text == "not reproduced (+0.3%, p=0.8, A/B try job 2)"

    # A person re-opens it: it stays open, and is still not told (not reproduced).
    person = User.objects.create_user("oncall")
    assert regression.triage(Regression.State.OPEN, user=person, note="real on H100")
    confirmation.release_overdue()
    notify.notify_regressions([regression])
    regression.refresh_from_db()
    assert regression.state == "open" and sent == []


def test_a_person_who_triaged_first_is_not_overruled(series, sent, started):
    mode("wait")
    regression = raised(series[0], started)
    regression.triage(Regression.State.ACKNOWLEDGED, user=User.objects.create_user("p"))
    confirmation.record(regression, C.NOT_REPRODUCED, "+0.1%, p=0.9")
    regression.refresh_from_db()
    assert regression.state == "acknowledged" and regression.confirmation == C.NOT_REPRODUCED


def test_past_the_time_limit_it_is_told_unconfirmed(series, sent, started):
    mode("wait", confirm_time_limit_minutes=30)
    regression = raised(series[0], started)
    assert tasks.confirmations_overdue.delay().get() == 0 and sent == []
    Regression.objects.filter(pk=regression.pk).update(
        held_until=timezone.now() - timedelta(seconds=1))
    assert tasks.confirmations_overdue.delay().get() == 1
    [payload] = sent
    assert payload["items"][0]["confirmation"] == "unconfirmed"
    assert payload["items"][0]["confirmation_note"] == "no verdict within the time limit"
    # the try job's verdict comes late: recorded nowhere, told nowhere
    assert not confirmation.record(regression, C.CONFIRMED, "late")
    regression.refresh_from_db()
    assert regression.confirmation == C.UNCONFIRMED and len(sent) == 1


def test_what_cannot_be_confirmed_is_told_at_once_and_says_why(series, sent, monkeypatch):
    mode("wait")
    monkeypatch.setattr(confirmation, "_starter", lambda r: "regression 1: its results were "
                        "not measured by a job of this site")
    ci = raised(series[0], None)
    assert ci.confirmation == C.NOT_CONFIRMABLE and ci.held_until is None
    assert ci.confirmation_note.endswith("not measured by a job of this site")
    monkeypatch.setattr(confirmation, "_starter", None)  # no bisects app
    alone = raised(series[1], None)
    assert alone.confirmation_note == confirmation.NO_JOB
    assert [p["items"][0]["confirmation"] for p in sent] == ["not_confirmable"] * 2

    accuracy = make_regression(series[0], 3, detector="accuracy")
    confirmation.request([accuracy])
    accuracy.refresh_from_db()
    assert accuracy.confirmation == C.NOT_CONFIRMABLE
    assert accuracy.confirmation_note == "a accuracy check is not measured by an A/B try job"


def test_notify_at_once_tells_while_pending_and_off_asks_nothing(series, sent, started):
    mode("at_once")
    regression = raised(series[0], started)
    assert regression.confirmation == C.PENDING and regression.held_until is None
    assert len(sent) == 1 and sent[0]["items"][0]["confirmation"] == "pending"
    confirmation.record(regression, C.NOT_REPRODUCED, "+0.2%, p=0.7")
    regression.refresh_from_db()
    assert regression.state == "false_positive" and len(sent) == 1

    mode("off")
    quiet = raised(series[1], started)
    assert started == [regression.pk] and quiet.confirmation == C.NONE
    assert len(sent) == 2 and sent[1]["items"][0]["confirmation"] is None


def test_a_held_group_waits_for_its_member(series, sent, started):
    mode("wait")
    first = make_regression(series[0], 2)
    second = make_regression(series[1], 2)
    make_group(first, second)
    confirmation.request([first, second])
    notify.notify_regressions([first, second])
    assert sent == []
    confirmation.record(first, C.CONFIRMED, "+20.0%, p=0.01")
    [payload] = sent
    assert payload["items"][0]["type"] == "group" and len(payload["items"][0]["members"]) == 2
    confirmation.record(second, C.CONFIRMED, "+21.0%, p=0.01")
    assert len(sent) == 1  # the group was told once


def test_a_confirmed_regression_waiting_for_its_bisect_is_told_with_the_culprit(
        series, sent, started):
    mode("wait", confirm_auto_bisect=True)
    regression = raised(series[0], started)
    assert confirmation.record(regression, C.CONFIRMED, "+20.0%, p=0.01", bisecting=True)
    regression.refresh_from_db()
    assert regression.held_until is not None and sent == []  # waits for the culprit
    culprit = {"sha": "c" * 40, "subject": "slow path", "author": "A <a@x>",
               "url": "https://git.example/c", "bisect_url": "/bisects/9/"}
    assert confirmation.bisect_ended(regression, culprit)
    [payload] = sent
    item = payload["items"][0]
    assert item["culprit"]["sha"] == "c" * 40
    assert item["culprit"]["bisect_url"].endswith("/bisects/9/")
    assert not confirmation.bisect_ended(regression, culprit) and len(sent) == 1


def test_the_line_of_an_item_says_its_confirmation_and_culprit():
    item = {"benchmark": "b", "model": "m", "metric": "t", "arch": "", "kind": "regression",
            "magnitude": 0.2, "detector": "changepoint", "repo": "r", "last_good_sha": "a",
            "first_bad_sha": "b", "confirmation": "confirmed", "confirmation_note": "+20%",
            "culprit": {"sha": "c" * 40, "subject": "s", "author": "A"}}
    assert notify._line(item).endswith(
        f"[changepoint], confirmed (+20%), culprit {'c' * 12} \"s\" by A")


def test_the_nightly_report_waits_for_its_nights_confirmations(series, started, monkeypatch):
    from benchsite.regressions import report as reports
    from benchsite.regressions.models import NightlyReport

    mode("wait")
    told = []
    monkeypatch.setattr(reports, "notify_report",
                        lambda report: told.append(report.pk) or True)
    regression = raised(series[0], started)
    day = regression.detected_at.date()
    [report] = reports.nightly_reports(day)
    report.refresh_from_db()
    assert report.waiting and told == []  # held: built, not sent
    assert reports.send_waiting() == 0 and told == []
    confirmation.record(regression, C.NOT_REPRODUCED, "+0.1%, p=0.9")  # releases it
    assert told == [report.pk]
    report = NightlyReport.objects.get(pk=report.pk)
    assert not report.waiting
    assert sum(row["regression"] for row in report.rows) == 0  # not reproduced: not counted


def test_a_bisect_that_ends_while_pending_does_not_release_it(series, sent, started):
    mode("wait")
    regression = raised(series[0], started)
    culprit = {"sha": "d" * 40, "subject": "s", "author": "A", "url": "", "bisect_url": "/b/"}
    assert not confirmation.bisect_ended(regression, culprit)  # a person's bisect, say
    regression.refresh_from_db()
    assert regression.held_until is not None and regression.culprit["sha"] == "d" * 40
    assert sent == []


def test_a_starter_that_fails_leaves_it_not_confirmable_and_told(series, sent, monkeypatch):
    mode("wait")

    def broken(regression):
        raise RuntimeError("database gone")

    monkeypatch.setattr(confirmation, "_starter", broken)
    regression = raised(series[0], None)
    assert regression.confirmation == C.NOT_CONFIRMABLE and regression.held_until is None
    assert regression.confirmation_note == "its try job could not be queued: database gone"
    assert len(sent) == 1


def test_detection_over_the_history_with_notify_asks_for_confirmation_first(db, sent,
                                                                          started):
    import io

    from django.core.management import call_command

    from benchsite.regressions.models import Regression as Stored
    from tests.regressions.factory import levels, store_history

    mode("wait")
    store_history({"step": levels(40, step_at=30, step=0.3)})
    call_command("detect_regressions", "--notify", stdout=io.StringIO())
    [regression] = Stored.objects.all()
    assert started == [regression.pk]  # its A/B try job was asked for
    assert regression.confirmation == C.PENDING and regression.held_until is not None
    assert sent == []  # held until its verdict


def test_the_lists_say_each_members_confirmation(series, sent, started, client):
    mode("wait")
    kept, gone = raised(series[0], started), raised(series[1], started)
    group = make_group(kept, gone)
    confirmation.record(kept, C.CONFIRMED, "+20.1 %, p=0.002")
    confirmation.record(gone, C.NOT_REPRODUCED, "+0.3 %, p=0.8")
    listed = client.get("/regressions/?state=any").content.decode()
    assert "1 confirmed, 1 not reproduced" in listed
    assert '<span class="confirmation confirmation-not_reproduced" title="+0.3 %, p=0.8">' \
           "not reproduced</span>" in listed
    page = client.get(group.get_absolute_url()).content.decode()
    assert '<td id="confirmations">1 confirmed, 1 not reproduced' in page
    data = client.get(group.get_absolute_url() + "?format=json").json()
    assert data["summary"]["confirmations"] == {"confirmed": 1, "not_reproduced": 1}
