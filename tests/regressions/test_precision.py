"""Triage precision (issue 33): valid, invalid and unlabelled alerts from triage states per
detector, confirmation and benchmark, the window, the Wilson interval, the benchmarks under
the floor with the threshold that would have avoided their invalid alerts, and the
regressions page's section, JSON and `?days=`."""

from datetime import timedelta

import pytest
from django.utils import timezone

from benchsite.regressions import precision as precisions
from benchsite.regressions.models import DetectionSettings, Regression
from benchsite.results.models import EnvironmentChange, Run, Series
from tests.regressions.factory import SPEEDUP, TIME, at, make_regression, record, upload

pytestmark = pytest.mark.django_db
END = at(40)  # windows of 30 days end here: records detected at nights 10..39 count


def series(benchmark: str, metric=TIME, repo: str = "pytorch/ao", model: str = "m") -> Series:
    """A series stored through the upload path (one night, far before the windows)."""
    upload(0, [record(model, [1.0], metric, benchmark=benchmark)], repo=repo,
           job=Run.objects.count())
    return Series.objects.get(repo=repo, benchmark=benchmark, metric=metric[0], model=model)


def raise_(one: Series, night: int, **fields) -> Regression:
    """A record detected at night + 3 (its first bad point at `night`)."""
    return make_regression(one, night, **fields)


def scored(**options) -> precisions.Precision:
    return precisions.triage_precision(DetectionSettings.load(), days=30, end=END, **options)


def test_the_precision_computation_from_triage_states():
    s = series("micro-benchmark api")
    # change point: valid (acknowledged, fixed, expected, a "change", a human over a
    # not-reproduced verdict), invalid (false positive, open and not reproduced, one
    # without a detection time created in the window), unlabelled (open, pending or
    # confirmed)
    raise_(s, 10, state="acknowledged", confirmation="confirmed")
    raise_(s, 11, state="fixed")
    raise_(s, 12, state="expected")
    raise_(s, 13, state="false_positive", confirmation="confirmed")
    raise_(s, 14, confirmation="not_reproduced")
    raise_(s, 15, confirmation="pending")
    raise_(s, 16, confirmation="confirmed")
    raise_(s, 18, kind="change", state="fixed")
    raise_(s, 21, state="fixed", confirmation="not_reproduced")
    undated = raise_(s, 19, state="false_positive")
    Regression.objects.filter(pk=undated.pk).update(detected_at=None, created_at=at(20))
    # not counted: an improvement, records detected before and at the window's end, one
    # without a detection time created now
    raise_(s, 17, kind="improvement", state="false_positive")
    raise_(s, 6, state="false_positive")
    raise_(s, 37, state="false_positive")
    late = raise_(s, 20, state="false_positive")
    Regression.objects.filter(pk=late.pk).update(detected_at=None)
    raise_(s, 22, detector="hud_policy", state="acknowledged")
    raise_(s, 23, detector="accuracy", state="false_positive")

    found = scored()
    assert found.detectors == {
        "changepoint": precisions.Score(valid=5, invalid=3, unlabelled=2),
        "hud_policy": precisions.Score(valid=1), "accuracy": precisions.Score(invalid=1),
        "missing": precisions.Score(),
        # confirmed: people found one valid, one a false positive, one not looked at; its
        # own "not reproduced" verdicts are never its score
        "confirmation": precisions.Score(valid=1, invalid=1, unlabelled=1)}
    changepoint = found.detectors["changepoint"]
    assert (changepoint.labels, changepoint.precision) == (8, 5 / 8)
    assert found.detectors["missing"].precision is None
    assert found.benchmarks == {("pytorch/ao", "micro-benchmark api"):
                                precisions.Score(valid=6, invalid=4, unlabelled=2)}
    # 60 % of 10 labels, under the 70 % floor: its invalid change points were 20 % (the
    # accuracy check's are no threshold's), as were the valid ones of both detectors
    assert found.below_floor == [("pytorch/ao", "micro-benchmark api")]
    [suggestion] = found.suggestions["pytorch/ao", "micro-benchmark api"]
    assert suggestion.text == ("a threshold of 20.5 % for micro-benchmark api (*time*, now "
                               "4 %) would have avoided 3 invalid alerts and missed 6 valid "
                               "ones")


def test_the_window_cuts_off_by_detection_time():
    s = series("micro-benchmark api")
    raise_(s, 6, state="fixed")  # detected at night 9
    raise_(s, 7, state="fixed")  # detected at night 10
    assert scored().detectors["changepoint"].valid == 1
    assert precisions.triage_precision(days=31, end=END).detectors["changepoint"].valid == 2
    assert precisions.triage_precision(days=30, end=at(9)).detectors["changepoint"].valid == 0
    other = series("other", repo="pytorch/pytorch")
    raise_(other, 20, state="false_positive")
    raise_(s, 25, state="fixed", branch="release")
    assert scored().detectors["changepoint"] == precisions.Score(valid=2, invalid=1)
    assert scored(repo="pytorch/ao", branch="main").detectors["changepoint"] == (
        precisions.Score(valid=1))


def test_the_wilson_interval():
    assert precisions.wilson(0, 0) is None
    low, high = precisions.wilson(8, 10)
    assert (round(low, 3), round(high, 3)) == (0.49, 0.943)
    few, many = precisions.wilson(2, 3), precisions.wilson(200, 300)
    assert few[0] < 2 / 3 < few[1] and many[0] < 2 / 3 < many[1]
    assert few[1] - few[0] > 4 * (many[1] - many[0])  # 3 labels say much less than 300
    assert precisions.wilson(3, 3)[0] < 0.5 and precisions.wilson(3, 3)[1] == 1.0
    assert precisions.wilson(0, 5)[0] == 0.0 and precisions.wilson(300, 300)[0] > 0.98
    assert precisions.Score(valid=8, invalid=2).text == "80 % (49–94 %)"
    assert precisions.Score(unlabelled=3).text == "—"


def test_step_above_and_days():
    assert [precisions.step_above(size) for size in (0.068, 0.07, 0.065, 0.0, 0.1234)] == [
        0.07, 0.075, 0.07, 0.005, 0.125]
    assert precisions.parse_days("1") == 1 and precisions.parse_days("3650") == 3650
    for wrong in ("0", "3651", "-1", "1.5", "abc", "", "²"):
        with pytest.raises(ValueError, match="whole number of days from 1 to 3650"):
            precisions.parse_days(wrong)


@pytest.fixture
def noisy():
    """'noisy': 2 valid and 7 invalid alerts (22 %); 'solid': 5 valid; 'few': 3 invalid
    (too few labels); 'below tolerance': 5 invalid HUD alerts smaller than the tolerance
    in force (no threshold avoids them)."""
    speedup, time = series("noisy", SPEEDUP), series("noisy", TIME)
    for night, size in ((10, 0.05), (11, -0.068), (12, 0.055)):
        raise_(speedup, night, magnitude=size, state="false_positive")
    raise_(speedup, 13, magnitude=0.06, confirmation="not_reproduced")
    raise_(speedup, 14, magnitude=0.03, detector="hud_policy", state="false_positive")
    raise_(speedup, 15, magnitude=0.065, state="fixed")  # missed by 7 %
    raise_(speedup, 16, magnitude=-0.2, state="acknowledged")
    raise_(speedup, 17, magnitude=0.5)  # unlabelled
    raise_(time, 18, magnitude=0.09, detector="hud_policy", state="false_positive")
    raise_(time, 19, detector="accuracy", state="false_positive")  # no threshold for it
    solid, few, below = series("solid"), series("few"), series("below tolerance")
    for night in range(10, 15):
        raise_(solid, night, state="fixed")
        raise_(below, night, magnitude=0.03, detector="hud_policy", state="false_positive")
    for night in range(10, 13):
        raise_(few, night, state="false_positive")


def test_benchmarks_under_the_floor_with_the_threshold_that_avoids_their_invalid_alerts(
        noisy):
    found = scored()
    assert found.below_floor == [("pytorch/ao", "below tolerance"), ("pytorch/ao", "noisy")]
    assert found.benchmarks["pytorch/ao", "noisy"] == precisions.Score(2, 7, 1)
    by_benchmark = {row["benchmark"]: row for row in found.floor_rows()}
    assert by_benchmark["below tolerance"]["suggestions"] == []
    speedups, times = by_benchmark["noisy"]["suggestions"]
    assert (speedups.metric, speedups.threshold, speedups.avoided, speedups.missed,
            speedups.current) == ("*speedup*", 0.07, 5, 1,
                                  {"changepoint": 0.04, "hud_policy": 0.05})
    assert speedups.text == ("a threshold of 7 % for noisy (*speedup*, now change point 4 %, "
                             "HUD policy 5 %) would have avoided 5 invalid alerts and missed "
                             "1 valid one")
    assert (times.metric, times.threshold, times.current) == ("*time*", 0.095,
                                                              {"hud_policy": 0.05})
    assert times.text == ("a threshold of 9.5 % for noisy (*time*, now 5 %) would have avoided "
                          "1 invalid alert and missed 0 valid ones")

    settings = DetectionSettings.load()
    settings.precision_floor, settings.precision_min_labels = 0.2, 3
    assert precisions.triage_precision(settings, days=30, end=END).below_floor == [
        ("pytorch/ao", "below tolerance"), ("pytorch/ao", "few")]


def test_the_regressions_page_shows_the_precision_and_its_json(noisy, client):
    page = client.get("/regressions/?state=any&days=3650")
    html = page.content.decode()
    assert page.status_code == 200
    assert "Triage precision (last 3650 days)" in html
    assert '<tr data-detector="changepoint"><td>change point</td>' in html
    assert "A threshold of 7 % for noisy (*speedup*, now change point 4 %, HUD policy 5 %) " \
           "would have avoided 5 invalid alerts and missed 1 valid one." in html
    assert 'data-benchmark="solid"' not in html and 'data-benchmark="noisy"' in html
    assert "No threshold change would have avoided its invalid alerts" in html  # below tol.
    assert '<input type="hidden" name="state" value="any">' in html

    data = client.get("/regressions/?state=any&days=3650&format=json").json()
    assert data["filters"]["days"] == 3650
    shown = data["precision"]
    assert set(shown) == {"days", "start", "end", "floor", "min_labels", "detectors",
                          "benchmarks", "below_floor"}
    assert [row["detector"] for row in shown["detectors"]] == [
        "changepoint", "hud_policy", "accuracy", "missing", "confirmation"]
    changepoint = shown["detectors"][0]
    assert {key: changepoint[key] for key in ("labels", "valid", "invalid", "unlabelled")} \
        == {"labels": 14, "valid": 7, "invalid": 7, "unlabelled": 1}
    assert changepoint["low"] < changepoint["precision"] == 0.5 < changepoint["high"]
    assert {(row["benchmark"], row["labels"]) for row in shown["benchmarks"]} == {
        ("noisy", 9), ("solid", 5), ("few", 3), ("below tolerance", 5)}
    [noisy_row] = [row for row in shown["below_floor"] if row["benchmark"] == "noisy"]
    assert [s["threshold"] for s in noisy_row["suggestions"]] == [0.07, 0.095]


def test_the_page_window_defaults_to_the_settings_and_days_is_validated(noisy, client):
    data = client.get("/regressions/?format=json").json()
    assert data["precision"]["days"] == 90 and data["filters"]["days"] == 90
    assert all(row["labels"] == 0 for row in data["precision"]["detectors"])  # 2025's
    Regression.objects.filter(series__benchmark="solid").update(
        detected_at=timezone.now() - timedelta(days=10))
    settings = DetectionSettings.load()
    settings.precision_days = 7
    settings.save()
    assert client.get("/regressions/?format=json").json()["precision"]["detectors"][0][
        "labels"] == 0
    assert client.get("/regressions/?days=11&format=json").json()["precision"][
        "detectors"][0]["labels"] == 5
    assert "Triage precision (last 7 days)" in client.get("/regressions/").content.decode()

    for wrong in ("0", "3651", "abc", "1.5", "-3"):
        answer = client.get(f"/regressions/?days={wrong}&format=json")
        assert answer.status_code == 400
        assert answer.json()["parameter"] == "days"
        assert "whole number of days from 1 to 3650" in answer.json()["error"]
    html = client.get("/regressions/?days=0")
    assert html.status_code == 400 and "whole number of days" in html.content.decode()


def test_a_regression_coinciding_with_an_environment_change_says_so_in_the_list(client):
    s = series("micro-benchmark api")
    upload(1, [record("m", [1.0])])
    before, after = Run.objects.order_by("timestamp")[:2]
    change = EnvironmentChange.objects.create(
        repo="pytorch/ao", branch="main", arch=s.arch, device=s.device, name="nightly",
        before_run=before, after_run=after, at=after.timestamp,
        summary="torch 2.10.0.dev20251019 -> 2.10.0.dev20251020")
    raise_(s, 1, environment_change=change)
    html = client.get("/regressions/").content.decode()
    assert html.count("environment: torch 2.10.0.dev20251019 -&gt; 2.10.0.dev20251020") == 2
    regressions = client.get("/regressions/?format=json").json()["tables"][0]
    [row] = regressions["rows"]
    assert row[regressions["columns"].index("environment")] == (
        "environment: torch 2.10.0.dev20251019 -> 2.10.0.dev20251020")
