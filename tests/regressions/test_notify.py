"""Notifications: one item per alert group, each group once; a local webhook server,
Slack-compatible JSON and email (locmem)."""

import pytest

from benchsite.regressions import notify, tasks
from benchsite.regressions.detection import detect_series
from benchsite.regressions.models import AlertGroup, NotificationTarget, Regression
from benchsite.results.models import Series, Upload
from tests.regressions.factory import levels, make_group, make_regression, sha, store_history

HOSTILE = "<b>model</b> & co"
MAIN = "main"


@pytest.fixture
def regressions(db):
    """Two series step at night 25 (one group), another at night 15 (a group of its own)."""
    series = store_history({HOSTILE: levels(40, step_at=25, step=0.3),
                            "twin": levels(40, step_at=25, step=0.3, seed=3),
                            "early": levels(40, step_at=15, step=0.3, seed=4),
                            "steady": levels(40, seed=1)})
    found = detect_series([s.pk for s in series.values()], MAIN)
    assert len(found) == 3 and AlertGroup.objects.count() == 2
    return found


def test_each_group_reaches_every_matching_target_once(regressions, webhook, mailoutbox,
                                                       settings):
    settings.BENCH_SITE_URL = "https://bench.example"
    NotificationTarget.objects.create(name="hook", kind="webhook", url=webhook.url + "/hook")
    NotificationTarget.objects.create(name="slack", kind="slack", url=webhook.url + "/slack")
    NotificationTarget.objects.create(name="team", kind="email", email="team@example.com")
    NotificationTarget.objects.create(name="other repo", kind="webhook",
                                      url=webhook.url + "/other", repo="vllm-project/*")
    NotificationTarget.objects.create(name="off", kind="webhook", url=webhook.url + "/off",
                                      enabled=False)

    assert notify.notify_regressions(regressions) == 2  # two groups, one item each

    received = dict(webhook.received)
    assert set(received) == {"/hook", "/slack"}
    generic = received["/hook"]
    assert (generic["event"], generic["count"]) == ("regressions", 2)
    newest, older = generic["items"]  # newest first
    group = AlertGroup.objects.get(first_bad_sha=sha(25))
    assert (newest["type"], newest["id"], newest["repo"], newest["branch"]) == (
        "group", group.pk, "pytorch/ao", MAIN)
    assert newest["url"] == f"https://bench.example/regressions/groups/{group.pk}/"
    assert (newest["last_good_sha"], newest["first_bad_sha"]) == (sha(24), sha(25))
    assert newest["counts"] == {"members": 2, "regressions": 2, "improvements": 0, "others": 0}
    assert newest["alerting"] == 2
    assert newest["benchmarks"] == ["micro-benchmark api"]
    assert newest["devices"] == ["NVIDIA H100 80GB HBM3"]
    assert newest["recipes_or_backends"] == ["int8dq"]
    assert newest["worst_magnitude"] == pytest.approx(-0.3, abs=0.03)  # for the better
    assert newest["median_magnitude"] == pytest.approx(-0.3, abs=0.03)
    assert newest["compare_url"] == (f"https://bench.example/compare/{sha(24)}...{sha(25)}"
                                     "?repo=pytorch%2Fao")
    assert newest["github_url"] == f"https://github.com/pytorch/ao/compare/{sha(24)}...{sha(25)}"
    assert {m["model"] for m in newest["members"]} == {HOSTILE, "twin"}
    assert newest["more_members"] == 0
    member = newest["members"][0]
    assert member["url"] == f"https://bench.example/regressions/{member['id']}/"
    assert (member["group"], member["kind"], member["first_bad_sha"]) == (
        group.pk, "regression", sha(25))
    assert member["magnitude"] == pytest.approx(0.3, abs=0.03)
    assert (older["first_bad_sha"], older["counts"]["members"]) == (sha(15), 1)

    slack = received["/slack"]
    assert slack["text"] == "3 new regressions detected in 2 alert groups"
    section = slack["blocks"][1]["text"]["text"]
    assert "&lt;b&gt;model&lt;/b&gt; &amp; co" in section and "<b>" not in section
    assert f"<https://bench.example/regressions/groups/{group.pk}/|" in section
    assert "2 regressions in micro-benchmark api on NVIDIA H100 80GB HBM3" in section
    [mail] = mailoutbox
    assert mail.to == ["team@example.com"]
    assert mail.subject.endswith("3 new regressions detected in 2 alert groups")
    assert HOSTILE in mail.body and f"/regressions/groups/{group.pk}/" in mail.body

    assert notify.notify_regressions(regressions) == 0  # claimed: never twice
    assert len(webhook.received) == 2 and len(mailoutbox) == 1
    assert all(r.notified_at for r in Regression.objects.all())
    assert all(g.notified_at for g in AlertGroup.objects.all())


def test_a_group_is_notified_once_when_detection_runs_again_or_a_member_joins(regressions,
                                                                              webhook):
    NotificationTarget.objects.create(name="hook", kind="webhook", url=webhook.url)
    first = [r for r in regressions if r.first_bad_sha == sha(25)]
    assert notify.notify_regressions(first[:1]) == 1  # one member told: its whole group
    [(_, payload)] = webhook.received
    assert payload["items"][0]["counts"]["members"] == 2
    assert Regression.objects.filter(notified_at__isnull=False).count() == 2

    ids = list(Series.objects.values_list("pk", flat=True))
    assert detect_series(ids, MAIN) == []  # detection again: records matched, none new
    assert notify.notify_regressions(first) == 0  # a retried task: claimed already
    group = first[0].group
    joined = make_regression(Series.objects.get(model="steady"), 25, magnitude=0.1)
    Regression.objects.filter(pk=joined.pk).update(group=group)
    joined.refresh_from_db()
    assert notify.notify_regressions([joined]) == 0  # the group was told
    assert len(webhook.received) == 1
    assert notify.notify_regressions(regressions) == 1  # the other group, still untold
    assert [item["first_bad_sha"] for item in webhook.received[1][1]["items"]] == [sha(15)]


def test_a_target_gets_the_groups_one_of_whose_members_it_matches(regressions, webhook):
    NotificationTarget.objects.create(name="micro", kind="webhook", url=webhook.url + "/micro",
                                      benchmark="micro-*")
    NotificationTarget.objects.create(name="inductor", kind="webhook",
                                      url=webhook.url + "/inductor", benchmark="TorchInductor")
    assert notify.notify_regressions(regressions) == 2
    assert [(path, payload["count"]) for path, payload in webhook.received] == [("/micro", 2)]


def test_ungrouped_regressions_are_told_one_by_one(regressions, webhook):
    NotificationTarget.objects.create(name="hook", kind="webhook", url=webhook.url)
    Regression.objects.update(group=None)  # recorded before groups existed
    legacy = list(Regression.objects.select_related("series").order_by("pk"))
    assert notify.notify_regressions(legacy) == 3
    [(_, payload)] = webhook.received
    assert [item["type"] for item in payload["items"]] == ["regression"] * 3
    assert {item["model"] for item in payload["items"]} == {HOSTILE, "twin", "early"}
    assert payload["items"][0]["group"] is None
    assert notify.notify_regressions(legacy) == 0


def test_a_big_group_lists_its_worst_members_within_slacks_limits(db, webhook):
    models = [f"layer {n} " + "x" * 80 for n in range(20)]
    series = store_history({model: levels(3) for model in models})
    members = [make_regression(series[model], 2, magnitude=0.05 + n / 100)
               for n, model in enumerate(models)]
    members.append(make_regression(series[models[0]], 2, kind="improvement",
                                   magnitude=-0.5, detector="hud_policy"))
    make_group(*members)
    NotificationTarget.objects.create(name="hook", kind="webhook", url=webhook.url + "/hook")
    NotificationTarget.objects.create(name="slack", kind="slack", url=webhook.url + "/slack")
    assert notify.notify_regressions(members) == 1
    received = dict(webhook.received)
    [item] = received["/hook"]["items"]
    assert (len(item["members"]), item["more_members"]) == (15, 6)
    assert item["counts"] == {"members": 21, "regressions": 20, "improvements": 1, "others": 0}
    assert item["worst_magnitude"] == pytest.approx(-0.24)
    assert [m["magnitude"] for m in item["members"][:2]] == pytest.approx([0.24, 0.23])
    assert all(m["kind"] == "regression" for m in item["members"])
    section = received["/slack"]["blocks"][1]["text"]["text"]
    assert len(section) <= 3000 and section.count("◦") < 20
    assert received["/slack"]["text"] == "20 new regressions detected in 1 alert group"


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
    [improvement] = detect_series([s.pk for s in series.values()], MAIN)
    assert improvement.kind == "improvement" and improvement.group_id
    assert notify.notify_regressions([improvement]) == 0
    assert webhook.received == []
    assert AlertGroup.objects.get().notified_at is None


@pytest.mark.django_db(transaction=True)
def test_an_upload_that_regresses_notifies_its_group_once(webhook):
    NotificationTarget.objects.create(name="hook", kind="webhook", url=webhook.url)
    # detection (and notification) runs on each upload
    store_history({"m": levels(40, step_at=30, step=0.3), "n": levels(40, step_at=30,
                                                                      step=0.3, seed=5)})
    [(_, payload)] = webhook.received
    [item] = payload["items"]
    assert (item["type"], item["first_bad_sha"], item["counts"]["members"]) == (
        "group", sha(30), 2)
    assert {m["detector"] for m in item["members"]} == {"changepoint"}
    last = Upload.objects.order_by("-pk").first()
    for _ in range(2):  # the task retried (at-least-once delivery)
        tasks.detect_upload.apply(args=[last.pk])
    assert len(webhook.received) == 1
