"""Detection on stored series: the ingestion path, records, dedupe and triage."""

from collections import defaultdict

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchsite.comparison.models import MetricDirection
from benchsite.regressions import detection
from benchsite.regressions.detect import Detection
from benchsite.regressions.detection import detect_series
from benchsite.regressions.models import (
    AlertGroup,
    DetectionSettings,
    Detector,
    Regression,
)
from benchsite.results.models import Series
from tests.regressions.factory import SPEEDUP, levels, record, sha, store_history, upload

MAIN = "main"


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
    assert (regression.branch, regression.group.first_bad_sha) == ("main", sha(30))
    assert regression.detected_at > regression.first_bad_at
    # The HUD policy's verdict is evidence on the record, never a second record.
    assert regression.evidence["hud_policy"]["status"] == "regression"
    assert not Regression.objects.filter(detector=Detector.HUD_POLICY).exists()


@pytest.mark.django_db(transaction=True)
def test_pull_request_uploads_raise_nothing_on_main():
    store_history({"m": levels(30, seed=3)})
    for night in range(30, 36):  # a PR's runs, 30 % slower, uploaded on each push
        upload(night, [record("m", [2.6, 2.6, 2.6])], branch="pr/123",
               head_sha=f"{night:040x}")
    assert not Regression.objects.exists()
    series = Series.objects.get(model="m")
    assert detect_series([series.pk], MAIN) == []  # main's history holds no PR point
    assert len(detect_series([series.pk], "pr/123")) == 0  # too few points of its own


@pytest.mark.django_db(transaction=True)
def test_default_branches_are_set_per_repo_in_the_settings():
    settings = DetectionSettings.load()
    settings.repo_branches.create(repo="pytorch/*", branches="trunk, release")
    assert DetectionSettings.load().branches_for("pytorch/ao") == ["trunk", "release"]
    assert DetectionSettings.load().branches_for("meta/x") == ["main"]
    for night in range(40):  # main is now nobody's default branch for pytorch/ao
        upload(night, [record("m", levels(40, step_at=30, step=0.3)[night])])
    assert not Regression.objects.exists()


@pytest.mark.django_db
def test_detection_again_matches_the_records_and_reads_with_a_fixed_number_of_queries():
    histories = {f"model-{n}": levels(40, step_at=25, step=-0.3, seed=n) for n in range(6)}
    series = store_history(histories, metric=SPEEDUP)
    ids = [s.pk for s in series.values()]
    with CaptureQueriesContext(connection) as few:
        detect_series(ids[:1], MAIN)
    created = detect_series(ids, MAIN)
    assert len(created) == 5  # one record per change: the five series not seen yet
    assert {(r.kind, r.first_bad_sha) for r in created} == {("regression", sha(25))}
    assert all(r.evidence["hud_policy"]["kind"] == "regression" for r in created)
    with CaptureQueriesContext(connection) as again:
        assert detect_series(ids, MAIN) == []
    assert Regression.objects.count() == 6
    assert AlertGroup.objects.count() == 1
    # Reading, settings, directions, records: the same for 1 or 6 series.
    assert len(again.captured_queries) <= len(few.captured_queries)


@pytest.mark.django_db
def test_a_false_positive_is_not_raised_again_but_a_later_change_is():
    series = store_history({"m": levels(40, step_at=25, step=-0.2)})["m"]
    detect_series([series.pk], MAIN)
    regression = Regression.objects.get(detector=Detector.CHANGEPOINT)
    user = User.objects.create_user("triager")
    assert regression.triage("false_positive", user, "a driver update")

    upload(40, [record("m", levels(1, level=1.6, seed=40)[0])])  # the next point
    assert detect_series([series.pk], MAIN) == []
    regression.refresh_from_db()
    assert regression.state == "false_positive"

    later = levels(30, level=1.6, step_at=15, step=0.25, seed=41)
    for night, values in enumerate(later, start=41):
        upload(night, [record("m", values)])
    [new] = detect_series([series.pk], MAIN)
    assert (new.first_bad_sha, new.state, new.kind, new.detector) == (
        sha(56), "open", "regression", Detector.CHANGEPOINT)
    assert new.group != regression.group


@pytest.mark.django_db
def test_triage_records_who_when_and_why_and_refuses_a_stale_change():
    series = store_history({"m": levels(40, step_at=25, step=0.2)})["m"]
    [regression] = detect_series([series.pk], MAIN)
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
    [change] = detect_series([series.pk], MAIN)  # direction unknown: no HUD policy either
    assert (change.kind, change.direction) == ("change", "")
    assert change.direction_rule.startswith("unknown: no table entry and no telling word")
    MetricDirection.objects.create(metric="widgets", direction="higher")
    Regression.objects.all().delete()
    found = detect_series([series.pk], MAIN)
    assert {r.detector: r.kind for r in found} == {"changepoint": "improvement"}
    assert found[0].direction_rule == "override: widgets: higher is better"


@pytest.mark.django_db
def test_a_change_recorded_meanwhile_by_a_concurrent_run_is_skipped(monkeypatch):
    series = store_history({"a": levels(40, step_at=25, step=0.3),
                            "b": levels(40, step_at=20, step=0.3, seed=1)})
    ids = [s.pk for s in series.values()]
    [first] = detect_series([series["a"].pk], MAIN)
    # As if the other run's record had been stored after this run looked for records.
    monkeypatch.setattr(detection, "_existing", lambda *args: defaultdict(list))
    created = detect_series(ids, MAIN)
    assert first.pk not in {r.pk for r in created}
    assert len(created) == 1 and Regression.objects.count() == 2
    assert all(r.events.count() == 1 for r in Regression.objects.all())


@pytest.mark.django_db
def test_the_hud_policy_raises_alone_only_where_its_threshold_says_so():
    speedups = [[1.0]] * 30 + [[0.8]] * 2 + [[1.0]] * 3 + [[0.8]] * 2 + [[1.0]] * 5
    series = store_history({"m": speedups}, metric=SPEEDUP)["m"]
    assert detect_series([series.pk], MAIN) == []  # blips: no change point
    DetectionSettings.load().thresholds.filter(metric="*speedup*").update(hud_raises=True)
    [record] = detect_series([series.pk], MAIN)  # episodes close together: one record
    assert (record.detector, record.first_bad_sha) == ("hud_policy", sha(30))


@pytest.mark.django_db
def test_instruction_counts_raise_change_points_from_one_percent():
    # Counts repeat almost exactly; a 2 % step is below the global 4 % minimum.
    step = {"add": levels(40, level=9000, step_at=30, step=0.02, noise=0.0005)}
    counts = store_history(step, metric=("instruction_count", "count"))["add"]
    times = store_history(step, metric=("Quantized Fwd Time (ms)", "ms"), first_night=0)["add"]
    found = detect_series([counts.pk, times.pk], MAIN)
    changepoints = [r for r in found if r.detector == Detector.CHANGEPOINT]
    assert [(r.series_id, r.first_bad_sha) for r in changepoints] == [(counts.pk, sha(30))]


@pytest.mark.django_db(transaction=True)
def test_one_change_in_many_series_is_one_group_with_an_aligned_range():
    # Five series step at night 30; a noisy one is placed a night off on its own.
    histories = {f"m{n}": levels(40, step_at=30, step=0.25, seed=n) for n in range(5)}
    store_history(histories)
    assert {r.first_bad_sha for r in Regression.objects.all()} == {sha(30)}
    [group] = AlertGroup.objects.all()
    assert (group.last_good_sha, group.first_bad_sha, group.members.count()) == (
        sha(29), sha(30), 5)


@pytest.mark.django_db(transaction=True)
def test_accuracy_from_pass_to_failure_is_raised_once():
    def accuracy(value: str) -> dict:
        return {**record("resnet50", [1.0]), "metric": {
            "name": "accuracy", "benchmark_values": [],
            "extra_info": {"benchmark_values": [value]}}}

    for night in range(10):
        upload(night, [accuracy("pass" if night < 6 else "fail_accuracy")])
    [raised] = Regression.objects.all()
    assert (raised.detector, raised.kind, raised.first_bad_sha, raised.last_good_sha) == (
        Detector.ACCURACY, "regression", sha(6), sha(5))
    assert (raised.baseline, raised.value, raised.magnitude) == (1.0, 0.0, -1.0)
    assert str(raised).startswith("accuracy check in")


@pytest.mark.django_db(transaction=True)
def test_a_metric_the_run_stops_reporting_is_raised():
    for night in range(3):
        upload(night, [record("a", [1.0]), record("b", [1.0])])
    upload(3, [record("a", [1.0])])
    [missing] = Regression.objects.all()
    assert (missing.detector, missing.series.model, missing.first_bad_sha) == (
        Detector.MISSING, "b", sha(3))


@pytest.mark.django_db(transaction=True)
def test_alignment_never_moves_a_change_where_its_own_points_disagree():
    store_history({"a": levels(50, step_at=30, step=0.10, noise=0.005, seed=1),
                   "b": levels(50, step_at=28, step=0.10, noise=0.005, seed=2),
                   "c": levels(50, step_at=28, step=0.10, noise=0.005, seed=3)})
    placed = {r.series.model: r.first_bad_sha for r in Regression.objects.all()}
    assert placed == {"a": sha(30), "b": sha(28), "c": sha(28)}
    assert AlertGroup.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_change_at_the_start_of_a_cut_window_is_not_raised_again():
    settings = DetectionSettings.load()
    settings.history_points = 60
    settings.save()
    # Detection runs after each upload: the 60-point window slides past the change.
    store_history({f"s{k}": levels(100, step_at=20, step=0.10, noise=0.01, seed=k)
                   for k in range(4)})
    assert sorted(Regression.objects.values_list("first_bad_sha", flat=True)) == [sha(20)] * 4


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("raised_at", [40, 69])
def test_a_cut_window_raises_only_what_the_new_points_raise(monkeypatch, raised_at):
    # The labelled set's deployed stream raised 2 of its 132 series' steps a second time
    # ~165 nights on: the 200-point window, cut short of the old level, placed the old
    # change a few points later, past both the matching tolerance and the window's start.
    # A change raised before the upload's own points was its own upload's to raise.
    settings = DetectionSettings.load()
    settings.history_points = 60
    settings.save()
    store_history({"flat": levels(69)})
    assert not Regression.objects.exists()
    in_window = 40  # night 69 is the window's last point (index 59): index 40 is night 50
    monkeypatch.setattr(detection.changepoint, "detect_many", lambda series, *args: [
        [Detection(index=in_window, detected_at=raised_at - 69 + 59, before=2.0, after=2.4,
                   confidence=1e-9)] for _ in series])
    store_history({"flat": levels(1)}, first_night=69)
    made = list(Regression.objects.values_list("first_bad_sha", flat=True))
    assert made == ([] if raised_at < 69 else [sha(50)])


@pytest.mark.django_db(transaction=True)
def test_a_record_spans_the_points_its_change_may_be_at_and_is_matched_across_them(
        monkeypatch):
    store_history({"flat": levels(40)})
    assert not Regression.objects.exists()

    def detected(index: int, earliest: int, at: int):
        monkeypatch.setattr(detection.changepoint, "detect_many", lambda series, *args: [
            [Detection(index=index, earliest=earliest, detected_at=at, before=2.0, after=2.4,
                       confidence=1e-9)] for _ in series])

    detected(index=33, earliest=31, at=40)  # the change may be at night 31, 32 or 33
    store_history({"flat": levels(1)}, first_night=40)
    [raised] = Regression.objects.all()
    assert (raised.last_good_sha, raised.first_bad_sha) == (sha(30), sha(33))
    assert (raised.group.last_good_sha, raised.group.first_bad_sha) == (sha(30), sha(33))
    # Placed later the next night, but its range still reaches the record: the same change.
    detected(index=37, earliest=33, at=41)
    store_history({"flat": levels(1)}, first_night=41)
    assert Regression.objects.get() == raised


def _trio() -> dict[str, list[list[float]]]:
    """b and c step at night 29; a at 30, its night 29 halfway between its levels, so its
    change may be at 29 or 30."""
    a = levels(50, step_at=30, step=0.10, noise=0.005, seed=4)
    a[29] = [2.0 * 1.05] * 3
    return {"a": a, "b": levels(50, step_at=29, step=0.10, noise=0.005, seed=5),
            "c": levels(50, step_at=29, step=0.10, noise=0.005, seed=6)}


def _ranges(models) -> dict[str, tuple[str, str]]:
    return {r.series.model: (r.last_good_sha, r.first_bad_sha)
            for r in Regression.objects.filter(series__model__in=models)}


@pytest.mark.django_db(transaction=True)
def test_a_record_is_narrowed_to_the_commit_other_series_agree_on():
    # In a repo where little changes, two series agreeing are no coincidence.
    store_history(_trio())
    assert _ranges("abc") == {"a": (sha(28), sha(29)), "b": (sha(28), sha(29)),
                              "c": (sha(28), sha(29))}
    [group] = AlertGroup.objects.all()
    assert (group.last_good_sha, group.first_bad_sha, group.members.count()) == (
        sha(28), sha(29), 3)


@pytest.mark.django_db(transaction=True)
def test_in_a_busy_repo_two_series_agreeing_do_not_move_a_record():
    # 30 more series, each stepping on a night of its own: two records at one commit are
    # then a coincidence. a keeps its range, which overlaps b's and c's: one group.
    busy = {f"s{n}": levels(50, step_at=8 + n, step=0.3, noise=0.005, seed=10 + n)
            for n in range(30) if 8 + n not in (29, 30)}
    store_history(_trio() | busy)
    assert Regression.objects.count() == 3 + len(busy)
    assert _ranges("abc") == {"a": (sha(28), sha(30)), "b": (sha(28), sha(29)),
                              "c": (sha(28), sha(29))}
    group = Regression.objects.get(series__model="a").group
    assert (group.last_good_sha, group.first_bad_sha, group.members.count()) == (
        sha(28), sha(29), 3)
