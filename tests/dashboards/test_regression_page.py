"""A regression's page: its chart's change labels never overlap, and "Log in to triage" is
the site's login, which comes back to the regression."""

import pytest
from django.contrib.auth.models import Permission, User

from benchsite.regressions.models import Regression
from benchsite.results.models import Series
from tests.regressions.factory import make_group, make_regression, record, upload

pytestmark = pytest.mark.django_db
LABEL_ROW_PX = 16


@pytest.fixture
def series():
    for night in range(40):
        upload(night, [record("a", [1.0])])
    return Series.objects.get()


def labels(client, regression: Regression) -> list[tuple[str, int]]:
    figure = client.get(regression.get_absolute_url() + "?format=json").json()["figures"][0]
    return sorted((label["x"], label.get("yshift", 0)) for label in figure["layout"]["annotations"])


def test_labels_of_changes_close_in_time_are_stacked_not_overlapping(client, series):
    first = make_regression(series, 20, magnitude=0.2)
    make_regression(series, 21, kind="improvement", magnitude=-0.2)  # a day later
    make_regression(series, 22, magnitude=0.1)  # and one more
    make_regression(series, 36, magnitude=0.1)  # two weeks on: room on the first row
    shown = labels(client, first)
    assert [shift for _, shift in shown] == [0, LABEL_ROW_PX, 2 * LABEL_ROW_PX, 0]
    figure = client.get(first.get_absolute_url() + "?format=json").json()["figures"][0]
    assert figure["layout"]["margin"]["t"] == 60 + 2 * LABEL_ROW_PX  # room for the rows


def test_a_lone_change_keeps_the_first_row(client, series):
    regression = make_regression(series, 20)
    assert [shift for _, shift in labels(client, regression)] == [0]
    figure = client.get(regression.get_absolute_url() + "?format=json").json()["figures"][0]
    assert figure["layout"]["margin"]["t"] == 60


def test_log_in_to_triage_is_the_site_login_and_comes_back(client, series):
    regression = make_regression(series, 20)
    page = client.get(regression.get_absolute_url()).content.decode()
    login = f"/accounts/login/?next={regression.get_absolute_url()}"
    assert f'<a href="{login}">Log in</a> to triage' in page
    form = client.get(login)
    assert form.status_code == 200 and b"/admin/" not in form.content.split(b"<main>")[1]
    assert f'name="next" value="{regression.get_absolute_url()}"'.encode() in form.content
    user = User.objects.create_user("triager", password="a long password")
    user.user_permissions.add(Permission.objects.get(codename="change_regression"))
    answer = client.post("/accounts/login/", {"username": "triager",
                                              "password": "a long password",
                                              "next": regression.get_absolute_url()})
    assert answer.status_code == 302 and answer["Location"] == regression.get_absolute_url()
    assert b'id="triage"' in client.get(answer["Location"]).content


def figure_of(client, regression: Regression) -> dict:
    return client.get(regression.get_absolute_url() + "?format=json").json()["figures"][0]


def test_the_chart_plots_only_the_regressions_own_branch(client, series):
    # A bisect's and a pull request's runs of the same series, far off the main level.
    for night, branch in ((20, "bisect/1"), (21, "bisect/1"), (22, "feature/pr")):
        upload(night, [record("a", [5.0])], job=1, branch=branch, head_sha=f"{branch}-{night}")
    regression = make_regression(series, 20)
    make_regression(series, 22, branch="release")  # another history's change: not marked
    figure = figure_of(client, regression)
    medians = next(trace for trace in figure["data"] if trace["name"] == "median")
    assert len(medians["x"]) == 40 and set(medians["y"]) == {1.0}
    assert all(text.endswith(" main") for text in medians["text"])
    repetitions = next(trace for trace in figure["data"] if trace["name"] == "repetitions")
    assert 5.0 not in repetitions["y"]
    lines = [shape for shape in figure["layout"]["shapes"] if shape["type"] == "line"]
    assert [line["x0"] for line in lines] == [regression.first_bad_at.isoformat()]
    embedded = client.get(regression.get_absolute_url()).content.decode()
    assert "bisect/1" not in embedded and "feature/pr" not in embedded


def accuracy(value: str) -> dict:
    return {**record("resnet50", [1.0]), "metric": {
        "name": "accuracy", "benchmark_values": [],
        "extra_info": {"benchmark_values": [value]}}}


@pytest.fixture
def broken():
    """A pass/fail series that fails from night 6 on, and its accuracy regression."""
    for night in range(10):
        upload(night, [accuracy("pass" if night < 6 else "fail_accuracy")])
    upload(7, [accuracy("pass")], job=1, branch="bisect/2", head_sha="bisect-7")
    return make_regression(Series.objects.get(metric="accuracy"), 6, detector="accuracy")


def test_a_pass_fail_series_is_a_strip_of_outcomes(client, broken):
    figure = figure_of(client, broken)
    rows = {trace["name"]: trace for trace in figure["data"]}
    assert set(rows) == {"pass", "fail"}
    assert (len(rows["pass"]["x"]), len(rows["fail"]["x"])) == (6, 4)  # main only
    assert set(rows["pass"]["y"]) == {"pass"} and set(rows["fail"]["y"]) == {"fail"}
    assert rows["fail"]["text"][0].startswith("fail_accuracy: ")
    assert rows["fail"]["text"][0].endswith(" main")
    assert figure["layout"]["yaxis"]["type"] == "category"
    assert figure["layout"]["yaxis"]["categoryarray"] == ["fail", "pass"]
    [label] = figure["layout"]["annotations"]
    assert label["text"] == "Regression pass → fail"


def test_an_accuracy_failure_reads_pass_to_fail_wherever_its_change_is_shown(client, broken):
    group = make_group(broken)
    shown = {"regression": client.get(broken.get_absolute_url()).content.decode(),
             "group": client.get(group.get_absolute_url()).content.decode(),
             "list": client.get("/regressions/").content.decode()}
    for page, html in shown.items():
        assert "pass → fail" in html, page
        assert "-100.0 %" not in html and "-100.0%" not in html, page
    listed = client.get("/regressions/?format=json").json()["tables"][0]
    [row] = listed["rows"]
    assert dict(zip(listed["columns"], row, strict=True))["change"] == "pass → fail"


def test_home_and_the_list_label_the_same_two_dates_of_a_group(client, series):
    first = make_regression(series, 20)  # first bad at night 20, detected at night 23
    group = make_group(first)
    bad = f"first bad commit {first.first_bad_at:%Y-%m-%d %H:%M}"  # UTC, as the site's
    detected = f"detected {first.detected_at:%Y-%m-%d %H:%M}"
    assert first.detected_at > first.first_bad_at
    pages = {"home": client.get("/").content.decode(),
             "list": client.get("/regressions/").content.decode(),
             "group": client.get(group.get_absolute_url()).content.decode()}
    for name in ("home", "list"):
        assert bad in pages[name] and detected in pages[name], name
    assert detected.split(" ", 1)[1] in pages["group"]
    listed = client.get("/regressions/?format=json").json()["tables"][1]
    row = dict(zip(listed["columns"], listed["rows"][0], strict=True))
    assert (row["first_bad_at"], row["detected_at"]) == (first.first_bad_at.isoformat(),
                                                         first.detected_at.isoformat())
