"""A regression's page: its chart's change labels never overlap, and "Log in to triage" is
the site's login, which comes back to the regression."""

import pytest
from django.contrib.auth.models import Permission, User

from benchsite.regressions.models import Regression
from benchsite.results.models import Series
from tests.regressions.factory import make_regression, record, upload

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
