"""Notifications: a local webhook server, Slack-compatible JSON and email (locmem)."""

import pytest

from benchsite.regressions import notify
from benchsite.regressions.detection import detect_series
from benchsite.regressions.models import NotificationTarget, Regression
from tests.regressions.factory import levels, sha, store_history

HOSTILE = "<b>model</b> & co"


@pytest.fixture
def regressions(db):
    series = store_history({HOSTILE: levels(40, step_at=25, step=0.3),
                            "steady": levels(40, seed=1)})
    return detect_series([s.pk for s in series.values()])


def test_new_regressions_reach_every_matching_target_once(regressions, webhook, mailoutbox,
                                                          settings):
    settings.BENCH_SITE_URL = "https://bench.example"
    NotificationTarget.objects.create(name="hook", kind="webhook", url=webhook.url + "/hook")
    NotificationTarget.objects.create(name="slack", kind="slack", url=webhook.url + "/slack")
    NotificationTarget.objects.create(name="team", kind="email", email="team@example.com")
    NotificationTarget.objects.create(name="other repo", kind="webhook",
                                      url=webhook.url + "/other", repo="vllm-project/*")
    NotificationTarget.objects.create(name="off", kind="webhook", url=webhook.url + "/off",
                                      enabled=False)

    assert notify.notify_regressions(regressions) == 2  # change point and HUD policy

    received = dict(webhook.received)
    assert set(received) == {"/hook", "/slack"}
    generic = received["/hook"]
    assert (generic["event"], generic["count"]) == ("regressions", 2)
    item = generic["items"][0]
    assert (item["model"], item["kind"], item["first_bad_sha"]) == (HOSTILE, "regression",
                                                                    sha(25))
    assert item["url"] == f"https://bench.example/regressions/{item['id']}/"
    assert item["magnitude"] == pytest.approx(0.3, abs=0.03)
    slack = received["/slack"]
    assert slack["text"] == "2 new regressions detected"
    section = slack["blocks"][1]["text"]["text"]
    assert "&lt;b&gt;model&lt;/b&gt; &amp; co" in section and "<b>" not in section
    assert "<https://bench.example/regressions/" in section
    [mail] = mailoutbox
    assert mail.to == ["team@example.com"] and mail.subject.endswith("2 new regressions detected")
    assert HOSTILE in mail.body

    assert notify.notify_regressions(regressions) == 0  # claimed: never twice
    assert len(webhook.received) == 2 and len(mailoutbox) == 1
    assert all(r.notified_at for r in Regression.objects.all())


def test_a_failing_target_does_not_stop_the_others(regressions, webhook, monkeypatch):
    warnings = []
    monkeypatch.setattr(notify.logger, "warning", lambda text, *args: warnings.append(
        text % args))
    NotificationTarget.objects.create(name="down", kind="webhook", url="http://127.0.0.1:9/")
    NotificationTarget.objects.create(name="broken", kind="webhook", url=webhook.url + "/broken")
    NotificationTarget.objects.create(name="up", kind="slack", url=webhook.url + "/up")
    assert notify.notify_regressions(regressions) == 2
    assert [path for path, _ in webhook.received] == ["/broken", "/up"]
    assert [warning.split(" failed")[0] for warning in warnings] == [
        "notification to down (webhook (generic JSON))",
        "notification to broken (webhook (generic JSON))"]


def test_improvements_are_not_notified(db, webhook):
    NotificationTarget.objects.create(name="hook", kind="webhook", url=webhook.url)
    series = store_history({"m": levels(40, step_at=25, step=-0.3)})
    [improvement] = detect_series([s.pk for s in series.values()])
    assert improvement.kind == "improvement"
    assert notify.notify_regressions([improvement]) == 0
    assert webhook.received == []


@pytest.mark.django_db(transaction=True)
def test_an_upload_that_regresses_notifies_the_webhook(webhook):
    NotificationTarget.objects.create(name="hook", kind="webhook", url=webhook.url)
    store_history({"m": levels(40, step_at=30, step=0.3)})  # detection runs on each upload
    items = [item for _, payload in webhook.received for item in payload["items"]]
    assert sorted(item["detector"] for item in items) == ["changepoint", "hud_policy"]
    assert {item["first_bad_sha"] for item in items} == {sha(30)}
