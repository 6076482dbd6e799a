"""Detection on stored series: the ingestion path, records, dedupe and triage."""

from collections import defaultdict

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchsite.regressions import detection
from benchsite.regressions.detection import detect_series
from benchsite.regressions.models import Detector, MetricDirection, Regression
from tests.regressions.factory import SPEEDUP, levels, record, sha, store_history, upload


@pytest.mark.django_db(transaction=True)
def test_an_upload_that_makes_a_series_worse_raises_a_regression():
    # One upload per night, detection running after each (inline: no broker in tests).
    store_history({"int8dq-1024": levels(40, step_at=30, step=0.10),
                   "int8dq-2048": levels(40, seed=1)})
    [regression] = Regression.objects.filter(detector=Detector.CHANGEPOINT)
    assert regression.series.model == "int8dq-1024"
    assert (regression.kind, regression.direction) == ("regression", "lower")
    assert (regression.last_good_sha, regression.first_bad_sha) == (sha(29), sha(30))
    assert regression.first_bad_run.head_sha == sha(30)
    assert regression.magnitude == pytest.approx(0.10, abs=0.02)
    assert regression.points_after <= 5
    assert regression.events.get().to_state == "open"
    # The HUD policy (time: 15 % tolerance) does not see a 10 % step.
    assert not Regression.objects.filter(detector=Detector.HUD_POLICY).exists()


@pytest.mark.django_db
def test_detection_again_matches_the_records_and_reads_with_a_fixed_number_of_queries():
    histories = {f"model-{n}": levels(40, step_at=25, step=-0.3, seed=n) for n in range(6)}
    series = store_history(histories, metric=SPEEDUP)
    ids = [s.pk for s in series.values()]
    with CaptureQueriesContext(connection) as few:
        detect_series(ids[:1])
    created = detect_series(ids)
    assert len(created) == 2 * 5  # both detectors, the five series not seen yet
    assert {(r.kind, r.first_bad_sha) for r in created} == {("regression", sha(25))}
    with CaptureQueriesContext(connection) as again:
        assert detect_series(ids) == []
    assert Regression.objects.count() == 12
    # Reading, settings, directions, records: the same for 1 or 6 series.
    assert len(again.captured_queries) <= len(few.captured_queries)


@pytest.mark.django_db
def test_a_false_positive_is_not_raised_again_but_a_later_change_is():
    series = store_history({"m": levels(40, step_at=25, step=-0.2)})["m"]
    detect_series([series.pk])
    regression = Regression.objects.get(detector=Detector.CHANGEPOINT)
    user = User.objects.create_user("triager")
    assert regression.triage("false_positive", user, "a driver update")

    upload(40, [record("m", levels(1, level=1.6, seed=40)[0])])  # the next point
    assert detect_series([series.pk]) == []
    regression.refresh_from_db()
    assert regression.state == "false_positive"

    later = levels(30, level=1.6, step_at=15, step=0.25, seed=41)
    for night, values in enumerate(later, start=41):
        upload(night, [record("m", values)])
    new = {r.detector: r for r in detect_series([series.pk])}
    assert {(r.first_bad_sha, r.state, r.kind) for r in new.values()} == {
        (sha(56), "open", "regression")}
    assert set(new) == {Detector.CHANGEPOINT, Detector.HUD_POLICY}


@pytest.mark.django_db
def test_triage_records_who_when_and_why_and_refuses_a_stale_change():
    series = store_history({"m": levels(40, step_at=25, step=0.2)})["m"]
    [regression, _hud] = sorted(detect_series([series.pk]), key=lambda r: r.detector)
    user = User.objects.create_user("alice")
    assert regression.triage("acknowledged", user)
    assert not regression.triage("acknowledged", user)  # no change, no note
    assert regression.triage("acknowledged", user, "bisecting")  # a note alone is recorded
    stale = Regression.objects.get(pk=regression.pk)
    assert regression.triage("fixed", user, "reverted in #123")
    assert not stale.triage("expected", user)  # someone else moved it meanwhile
    history = [(e.user and e.user.username, e.from_state, e.to_state, e.note)
               for e in regression.events.all()]
    assert history == [(None, "", "open", "raised by the change point"),
                       ("alice", "open", "acknowledged", ""),
                       ("alice", "acknowledged", "acknowledged", "bisecting"),
                       ("alice", "acknowledged", "fixed", "reverted in #123")]
    with pytest.raises(ValueError, match="state='gone'"):
        regression.triage("gone")


@pytest.mark.django_db
def test_the_direction_override_and_unknown_directions():
    series = store_history({"m": levels(40, step_at=25, step=0.2)},
                           metric=("widgets", ""))["m"]
    [change] = detect_series([series.pk])  # direction unknown: no HUD policy either
    assert (change.kind, change.direction) == ("change", "")
    assert change.direction_rule.startswith("unknown: no table entry and no telling word")
    MetricDirection.objects.create(metric="widgets", direction="higher")
    Regression.objects.all().delete()
    found = detect_series([series.pk])
    assert {r.detector: r.kind for r in found} == {"changepoint": "improvement"}
    assert found[0].direction_rule == "override: widgets: higher is better"


@pytest.mark.django_db
def test_a_change_recorded_meanwhile_by_a_concurrent_run_is_skipped(monkeypatch):
    series = store_history({"a": levels(40, step_at=25, step=0.3),
                            "b": levels(40, step_at=20, step=0.3, seed=1)})
    ids = [s.pk for s in series.values()]
    [first, *_] = detect_series([series["a"].pk])
    Regression.objects.exclude(pk=first.pk).delete()
    # As if the other run's record had been stored after this run looked for records.
    monkeypatch.setattr(detection, "_existing", lambda histories: defaultdict(list))
    created = detect_series(ids)
    assert first.pk not in {r.pk for r in created}
    assert len(created) == 3 and Regression.objects.count() == 4
    assert all(r.events.count() == 1 for r in Regression.objects.all())


@pytest.mark.django_db
def test_hud_episodes_close_together_are_one_record():
    speedups = [[1.0]] * 30 + [[0.8]] * 2 + [[1.0]] * 3 + [[0.8]] * 2 + [[1.0]] * 5
    series = store_history({"m": speedups}, metric=SPEEDUP)["m"]
    [record] = detect_series([series.pk])
    assert (record.detector, record.first_bad_sha) == ("hud_policy", sha(30))


@pytest.mark.django_db
def test_instruction_counts_raise_change_points_from_one_percent():
    # Counts repeat almost exactly; a 2 % step is below the global 4 % minimum.
    step = {"add": levels(40, level=9000, step_at=30, step=0.02, noise=0.0005)}
    counts = store_history(step, metric=("instruction_count", "count"))["add"]
    times = store_history(step, metric=("Quantized Fwd Time (ms)", "ms"), first_night=0)["add"]
    found = detect_series([counts.pk, times.pk])
    changepoints = [r for r in found if r.detector == Detector.CHANGEPOINT]
    assert [(r.series_id, r.first_bad_sha) for r in changepoints] == [(counts.pk, sha(30))]
