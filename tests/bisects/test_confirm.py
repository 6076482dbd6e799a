"""Confirming before alerting (issue 32), the bisects' side: a regression a job measured
queues an A/B try job of its cell; the try job's end gives the verdict (confirmed, not
reproduced, unconfirmed when it failed) and a confirmed regression starts its bisect, whose
culprit its one notification names. Finished try jobs are written as a worker leaves them
(`execute.finish`), without building anything; the demo repository's real path is in
`test_confirm_demo.py`."""

from __future__ import annotations

import random
from statistics import median

import pytest
from django.utils.html import escape
from scipy import stats

from benchsite.bisects import execute, start
from benchsite.bisects.confirm import verdict
from benchsite.bisects.lab import SiteLab, label
from benchsite.bisects.models import Bisect, BisectStep
from benchsite.bisects.search import CULPRIT, FAILED, Outcome
from benchsite.regressions import confirmation, notify
from benchsite.regressions.models import DetectionSettings, NotificationTarget, Regression
from benchsite.results.models import Series
from tests.bisects.test_start import KEY, measured_regression  # noqa: F401  (a fixture)
from tests.regressions.factory import make_regression, record, sha, upload

pytestmark = pytest.mark.django_db
C = Regression.Confirmation
METRIC = "Quantized Fwd Time (ms)"  # the factory's, the measured regression's


@pytest.fixture
def sent(monkeypatch):
    payloads = []
    monkeypatch.setattr(notify, "post_json", lambda url, payload: payloads.append(payload) or 200)
    NotificationTarget.objects.create(name="hook", kind="webhook", url="https://h.example/x",
                                      repo="demo/*")
    return payloads


@pytest.fixture
def asked(measured_regression):  # noqa: F811
    """The measured regression with its confirmation asked: its try job queued (not run)."""
    DetectionSettings.load()
    confirmation.request([measured_regression])
    measured_regression.refresh_from_db()
    return measured_regression


def finish_ab(bisect, base, head, outcome=None):
    """The try job as a worker leaves it: each side's interleaved rounds (the n-th of base
    and of head a pair), each round's repetitions."""
    bisect.state, bisect.commits = "running", [bisect.good_ref, bisect.bad_ref]
    bisect.good_sha, bisect.bad_sha = bisect.commits
    bisect.save()
    for position, rounds in ((0, base), (1, head)):
        BisectStep.objects.create(
            bisect=bisect, position=position, side=("base", "head")[position],
            sha=bisect.commits[position], rounds=[
                {"upload": None, "with": 1 - position, "values": {label(KEY, METRIC): values}}
                for values in rounds])
    with_callbacks = outcome or Outcome("finished", "interleaved rounds of base and head")
    execute.finish(bisect, SiteLab(bisect), with_callbacks)
    bisect.refresh_from_db()
    return bisect


def noisy(level, seed, rounds=3):
    """Rounds of three repetitions at `level`, 2 % noise."""
    rng = random.Random(seed)
    return [[level * (1 + rng.uniform(-0.02, 0.02)) for _ in range(3)] for _ in range(rounds)]


def burst(rounds, hit):
    """The rounds with round `hit` run during a burst of other load: 2x slower."""
    return [[2 * v for v in values] if number == hit else values
            for number, values in enumerate(rounds)]


def detected(regression, magnitude):
    Regression.objects.filter(pk=regression.pk).update(magnitude=magnitude)


def test_a_measured_regression_queues_an_ab_try_job_of_its_cell(asked):
    assert asked.confirmation == C.PENDING and asked.held_until is not None
    [bisect] = Bisect.objects.all()
    assert bisect.kind == Bisect.Kind.AB and bisect.confirms and bisect.regression == asked
    assert (bisect.good_ref, bisect.bad_ref) == (sha(2), sha(3))
    assert [cell["key"] for cell in bisect.cells] == [KEY] and bisect.metric == METRIC
    assert bisect.worse == 1  # lower is better
    assert bisect.queue == "cpu" and bisect.state == Bisect.State.PENDING


def test_a_series_no_job_measured_is_not_confirmable_and_told_at_once(source, sent):
    for night in range(4):
        upload(night, [record("m", [1.0] * 3)], repo="demo/pkg")
    regression = make_regression(Series.objects.get(repo="demo/pkg", model="m"), 2)
    confirmation.request([regression])
    notify.notify_regressions([regression])
    regression.refresh_from_db()
    assert regression.confirmation == C.NOT_CONFIRMABLE and not Bisect.objects.exists()
    assert "not measured by a job of this site" in regression.confirmation_note
    assert sent[0]["items"][0]["confirmation"] == "not_confirmable"


def test_a_reproduced_change_confirms_and_is_told_once(asked, sent,
                                                      django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        bisect = finish_ab(Bisect.objects.get(), noisy(1.0, 1), noisy(3.0, 2))
    asked.refresh_from_db()
    assert asked.confirmation == C.CONFIRMED and asked.held_until is None
    assert asked.confirmation_note.startswith("+2")
    assert asked.confirmation_note.endswith(f"A/B try job {bisect.pk}")
    [payload] = sent
    assert payload["items"][0]["confirmation"] == "confirmed"
    assert not Bisect.objects.filter(kind=Bisect.Kind.BISECT).exists()  # auto-bisect is off


def test_a_change_not_reproduced_is_not_told_and_marked_invalid(
        asked, sent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        bisect = finish_ab(Bisect.objects.get(), noisy(1.0, 1), noisy(1.0, 2))
    asked.refresh_from_db()
    assert asked.confirmation == C.NOT_REPRODUCED and asked.state == "false_positive"
    assert asked.confirmation_note.endswith(
        f"A/B try job {bisect.pk}: not a significant change the worse way of half the "
        "detected +200.0% (log scale) or more")
    assert asked.events.order_by("-pk").first().note.startswith("not reproduced: ")
    assert sent == []


def test_a_failed_try_job_leaves_it_unconfirmed_and_told(asked, sent,
                                                        django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        finish_ab(Bisect.objects.get(), [], [], Outcome(FAILED, "does not build: boom"))
    asked.refresh_from_db()
    assert asked.confirmation == C.UNCONFIRMED and "failed: does not build" in \
        asked.confirmation_note
    assert sent[0]["items"][0]["confirmation"] == "unconfirmed"


def test_a_confirmed_regression_is_bisected_and_told_once_with_the_culprit(
        asked, sent, django_capture_on_commit_callbacks, monkeypatch):
    DetectionSettings.objects.filter(pk=1).update(confirm_auto_bisect=True)
    monkeypatch.setattr(start, "enqueue", lambda bisect: True)  # queued, not run
    with django_capture_on_commit_callbacks(execute=True):
        finish_ab(Bisect.objects.get(), noisy(1.0, 1), noisy(3.0, 2))
    asked.refresh_from_db()
    bisect = Bisect.objects.get(kind=Bisect.Kind.BISECT)
    assert bisect.regression == asked and not bisect.confirms
    assert asked.confirmation == C.CONFIRMED and asked.held_until is not None and sent == []

    bisect.state, bisect.commits = "running", [sha(2), sha(3)]
    bisect.good_sha, bisect.bad_sha = sha(2), sha(3)
    bisect.save()
    for position, level in ((0, 1.0), (1, 3.0)):
        BisectStep.objects.create(bisect=bisect, position=position, sha=sha(2 + position),
                                  subject=f"commit {position}", author="A <a@example.com>",
                                  rounds=[{"upload": None, "with": 1 - position,
                                           "values": {label(KEY, METRIC): [level] * 6}}])
    with django_capture_on_commit_callbacks(execute=True):
        execute.finish(bisect, SiteLab(bisect), Outcome(
            CULPRIT, "+200.0% from its parent", culprit=1, magnitude=2.0, p_value=0.002,
            original_change=2.0, worse=1, verdicts={0: "good", 1: "bad"}))
    [payload] = sent  # one message: the alert, naming the culprit (no separate culprit one)
    assert payload["event"] == "regressions"
    item = payload["items"][0]
    assert item["confirmation"] == "confirmed" and item["culprit"]["sha"] == sha(3)
    assert item["culprit"]["bisect_url"].endswith(f"/bisects/{bisect.pk}/")
    asked.refresh_from_db()
    assert asked.held_until is None and asked.culprit["subject"] == "commit 1"


def test_a_confirmed_regression_that_cannot_be_bisected_is_told_without_waiting(
        asked, sent, django_capture_on_commit_callbacks, monkeypatch):
    DetectionSettings.objects.filter(pk=1).update(confirm_auto_bisect=True)

    def refused(regression):
        raise start.BisectRefused("no source")

    monkeypatch.setattr("benchsite.bisects.confirm.start_regression", refused)
    with django_capture_on_commit_callbacks(execute=True):
        finish_ab(Bisect.objects.get(), noisy(1.0, 1), noisy(3.0, 2))
    assert len(sent) == 1 and sent[0]["items"][0]["culprit"] is None


def test_a_burst_on_one_round_does_not_confirm_what_pooled_repetitions_would(asked, client):
    """Two rounds a side, nothing changed but one head round hit by a 2x burst. Pooled, the
    repetitions' medians are +50 % apart and Mann-Whitney says they differ: a detected +60 %
    would have been confirmed. Pair by pair, one pair is hit and the other is not: the
    change is the pair nearer 0, and the pairs disagree."""
    detected(asked, 0.6)
    base, head = noisy(1.0, 1, rounds=2), burst(noisy(1.0, 11, rounds=2), 1)
    pooled_base = [v for values in base for v in values]
    pooled_head = [v for values in head for v in values]
    assert median(pooled_head) / median(pooled_base) > 1.45
    assert stats.mannwhitneyu(pooled_base, pooled_head).pvalue < 0.05
    bisect = finish_ab(Bisect.objects.get(), base, head)
    [row] = bisect.outcome["series"]
    assert abs(row["change"]) < 0.02 and row["pairs"] == 2
    # The p shown is the one that judged it: the pairs of rounds', not the repetitions'.
    assert not row["agree"] and not row["significant"] and row["p_value"] > 0.05
    assert verdict(bisect)[0] == C.NOT_REPRODUCED
    assert '<td class="num">2 (disagree)</td>' in client.get(
        bisect.get_absolute_url()).content.decode()


def test_a_steady_slowdown_is_confirmed_and_says_how_it_was_judged(asked, client):
    detected(asked, 0.5)
    bisect = finish_ab(Bisect.objects.get(), noisy(1.0, 1), noisy(1.5, 2))
    [row] = bisect.outcome["series"]
    assert row["change"] == pytest.approx(0.5, abs=0.03) and row["significant"]
    assert (row["pairs"], row["agree"]) == (3, True)
    state, note = verdict(bisect)
    assert state == C.CONFIRMED and note.startswith("+5")
    rule = bisect.outcome["series_rule"]
    assert rule.startswith("pairs of rounds: the change is the median") and "p < 0.05" in rule
    page = client.get(bisect.get_absolute_url()).content.decode()
    assert f'<p class="muted" id="series-rule">Judged by {escape(rule)}.</p>' in page
    assert client.get(f"/api/v3/bisects/{bisect.pk}").json()["outcome"]["series_rule"] == rule


def test_a_burst_on_one_pair_in_four_does_not_hide_a_steady_slowdown(asked):
    detected(asked, 0.5)
    bisect = finish_ab(Bisect.objects.get(), burst(noisy(1.0, 1, rounds=4), 1),
                       noisy(1.5, 2, rounds=4))
    [row] = bisect.outcome["series"]  # the hit pair: head -25 %; the others: +50 %
    assert row["change"] == pytest.approx(0.5, abs=0.03) and row["agree"]
    assert verdict(bisect)[0] == C.CONFIRMED


def test_too_few_repetitions_leave_it_unconfirmed(asked):
    bisect = finish_ab(Bisect.objects.get(), [[1.0]] * 3, [[3.0]] * 3)
    [row] = bisect.outcome["series"]
    assert row["p_value"] is None and not row["significant"]
    assert verdict(bisect) == (C.UNCONFIRMED, f"+200.0%, too few values to judge, "
                                              f"A/B try job {bisect.pk}")


@pytest.mark.parametrize(("head", "significant", "expected"), [
    (1.8, True, C.CONFIRMED),  # 1.8x: past half of the detected 3x in log scale (1.73x)
    (1.6, True, C.NOT_REPRODUCED),  # short of it
    (0.5, True, C.NOT_REPRODUCED),  # faster: the better way
    (3.0, False, C.UNCONFIRMED),  # as large, but not significant: told, never invalid
    (1.1, False, C.NOT_REPRODUCED),  # small and not significant
])
def test_the_verdict_needs_a_significant_change_the_worse_way_of_half_the_detected(
        asked, head, significant, expected):
    bisect = Bisect.objects.get()
    bisect.state = Bisect.State.FINISHED
    bisect.outcome = {"series": [{"series": label(KEY, METRIC), "change": head - 1,
                                  "p_value": 0.002 if significant else 0.3,
                                  "significant": significant}]}
    assert verdict(bisect)[0] == expected
    bisect.outcome["series"][0]["p_value"] = None  # too few repetitions
    assert verdict(bisect) == (C.UNCONFIRMED, f"{head - 1:+.1%}, too few values to judge, "
                                              f"A/B try job {bisect.pk}")
    bisect.outcome = {"series": []}
    assert verdict(bisect) == (C.UNCONFIRMED, f"A/B try job {bisect.pk} did not measure {METRIC}")


def test_the_regression_page_says_its_confirmation(asked, client):
    page = client.get(asked.get_absolute_url()).content.decode()
    assert '<td id="confirmation" class="confirmation-pending">confirmation pending' in page
    assert "its notification waits until" in page
    confirmation.record(asked, C.NOT_REPRODUCED, "+0.3%, p=0.8, A/B try job 1")
    page = client.get(asked.get_absolute_url()).content.decode()
    assert "not reproduced (+0.3%, p=0.8, A/B try job 1)" in page and "waits until" not in page
