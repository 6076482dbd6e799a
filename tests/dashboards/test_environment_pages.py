"""Environments where users look: a run's fingerprint and the change it follows on its
page, environment changes marked on the trends, explorer and regression charts (on the
chart's devices only), and a regression (and its group) that coincides with one."""

from html import escape

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchsite.regressions.detection import detect_repo
from benchsite.regressions.models import Detector, Regression
from benchsite.results.models import EnvironmentChange, Run
from dashboards.filters import ALL
from tests.regressions.factory import H100, at, levels, record, upload

pytestmark = pytest.mark.django_db

A100 = "NVIDIA A100-SXM4-80GB"
NIGHTS = 40
H100_CHANGE, A100_CHANGE = 30, 20  # the night each device gets the new torch nightly
OLD, NEW = "2.13.0.dev20261120", "2.13.0.dev20261121"
SUMMARY = f"torch {OLD} -> {NEW}"
SHOWN = escape(SUMMARY)  # in HTML, and in a chart's labels (plotly renders their HTML)
WINDOW = {"repo": "pytorch/ao", "benchmark": "micro-benchmark api", "branch": "main",
          "start": at(0).date().isoformat(), "end": at(NIGHTS).date().isoformat()}


def with_torch(cell: dict, night: int, changed_at: int) -> dict:
    return {**cell, "dependencies": {"torch": {"version": NEW if night >= changed_at
                                               else OLD}}}


@pytest.fixture
def history():
    """Two models 20 % slower on the H100 from the night its torch changed; the A100,
    whose torch changed on another night, unchanged. Detection made the regressions."""
    h100 = {model: levels(NIGHTS, step_at=H100_CHANGE, step=0.2, seed=seed)
            for seed, model in enumerate(("a", "b"))}
    a100 = levels(NIGHTS, seed=2)
    for night in range(NIGHTS):
        upload(night, [
            *(with_torch(record(model, values[night]), night, H100_CHANGE)
              for model, values in h100.items()),
            with_torch(record("a", a100[night], arch=A100), night, A100_CHANGE)])
    detect_repo("pytorch/ao")


def change_on(arch: str) -> EnvironmentChange:
    return EnvironmentChange.objects.get(arch=arch)


def regression_of(model: str) -> Regression:
    return Regression.objects.get(series__model=model, series__arch=H100,
                                  detector=Detector.CHANGEPOINT)


def marks(figure: dict) -> list[tuple[str, str]]:
    """The environment marks of a figure: (time, hover text), each with its line."""
    layout = figure["layout"]
    lines = [shape["x0"] for shape in layout["shapes"] if shape.get("name") == "environment"]
    labels = [(label["x"], label["hovertext"]) for label in layout["annotations"]
              if label.get("name") == "environment"]
    assert sorted(lines) == sorted(x for x, _ in labels)
    return labels


def test_a_run_page_shows_its_environment_and_the_change_it_follows(client, history):
    change = change_on(H100)
    page = client.get(f"/runs/{change.after_run_id}/").content.decode()
    assert f"<th>torch</th><td>{NEW}</td>" in page
    assert change.after_run.environment_hash[:12] in page
    assert (f'Environment changed since <a href="/runs/{change.before_run_id}/">run '
            f"{change.before_run_id}</a>") in page
    assert SHOWN in page
    data = client.get(f"/runs/{change.after_run_id}/?format=json").json()
    assert data["environment"] == {"torch": NEW}
    assert data["environment_change"]["before_run"] == change.before_run_id
    assert "<summary>Runners and dependencies</summary>" in page  # the raw upload stays

    before = client.get(f"/runs/{change.before_run_id}/")
    assert b"Environment changed since" not in before.content
    assert client.get(f"/runs/{change.before_run_id}/?format=json").json()[
        "environment_change"] is None


def test_a_run_without_a_fingerprint_says_so(client):
    upload(0, [record("a", [1.0])])
    page = client.get(f"/runs/{Run.objects.get().pk}/").content.decode()
    assert "No environment fingerprint" in page


def test_the_regression_chart_marks_the_change_on_its_device(client, history):
    regression = regression_of("a")
    data = client.get(regression.get_absolute_url() + "?format=json").json()
    assert marks(data["figures"][0]) == [(at(H100_CHANGE).isoformat(),
                                          f"environment: {SHOWN}")]  # not the A100's


def test_jobs_on_one_machine_that_get_the_same_nightly_are_one_mark(client, history):
    change = change_on(H100)
    upload(H100_CHANGE, [with_torch(record("c", [1.0]), H100_CHANGE, H100_CHANGE)], job=1)
    other = Run.objects.get(job_id=100 * H100_CHANGE + 1)
    EnvironmentChange.objects.create(
        repo=change.repo, branch=change.branch, device=change.device, arch=change.arch,
        name="another job", before_run=change.before_run, after_run=other, at=other.timestamp,
        changes=change.changes, summary=change.summary)
    data = client.get(regression_of("a").get_absolute_url() + "?format=json").json()
    assert [x for x, _ in marks(data["figures"][0])] == [at(H100_CHANGE).isoformat()]


def test_the_trends_chart_marks_changes_of_the_device_it_shows(client, history):
    def figure(arch):
        answer = client.get("/trends/", {**WINDOW, "arch": arch, "format": "json"}).json()
        return answer["figures"][0]

    assert [x for x, _ in marks(figure(H100))] == [at(H100_CHANGE).isoformat()]
    assert [x for x, _ in marks(figure(A100))] == [at(A100_CHANGE).isoformat()]
    every = marks(figure(ALL))  # a line per device: each mark names its device
    assert every == [(at(A100_CHANGE).isoformat(), f"environment ({A100}): {SHOWN}"),
                     (at(H100_CHANGE).isoformat(), f"environment ({H100}): {SHOWN}")]


def test_the_explorer_chart_marks_changes_of_the_device_it_shows(client, history):
    def figure(arch):
        answer = client.get("/explorer/", {**WINDOW, "arch": arch, "format": "json"}).json()
        return answer["figures"][0]

    assert marks(figure(H100)) == [(at(H100_CHANGE).isoformat(), f"environment: {SHOWN}")]
    assert [x for x, _ in marks(figure(A100))] == [at(A100_CHANGE).isoformat()]
    assert [hover for _, hover in marks(figure(ALL))] == [
        f"environment ({A100}): {SHOWN}", f"environment ({H100}): {SHOWN}"]


@pytest.mark.parametrize("page", ["/trends/", "/explorer/"])
def test_marks_cost_one_query_a_page(client, history, page):
    query = {**WINDOW, "arch": ALL, "format": "json"}
    with CaptureQueriesContext(connection) as queries:
        assert client.get(page, query).status_code == 200
    assert sum("results_environmentchange" in q["sql"] for q in queries) == 1


def test_a_regression_that_coincides_with_a_change_says_so(client, history):
    regression, change = regression_of("a"), change_on(H100)
    assert regression.environment_change == change
    page = client.get(regression.get_absolute_url()).content.decode()
    assert f"<b>environment: {SHOWN}</b>" in page
    assert f'the first run in it: <a href="/runs/{change.after_run_id}/">' in page
    data = client.get(regression.get_absolute_url() + "?format=json").json()
    assert data["environment_change"] == {
        "summary": SUMMARY, "changes": [{"key": "torch", "before": OLD, "after": NEW}],
        "at": at(H100_CHANGE).isoformat(), "before_run": change.before_run_id,
        "after_run": change.after_run_id}


def test_a_regression_without_one_says_nothing(client, history):
    regression = regression_of("a")
    Regression.objects.filter(pk=regression.pk).update(environment_change=None)
    page = client.get(regression.get_absolute_url()).content.decode()
    assert 'id="environment"' not in page
    assert client.get(regression.get_absolute_url() + "?format=json").json()[
        "environment_change"] is None


def test_a_group_says_when_its_members_coincide_with_one_change(client, history):
    first, second = regression_of("a"), regression_of("b")
    assert first.group_id == second.group_id
    url = first.group.get_absolute_url()
    page = client.get(url).content.decode()
    assert "Every member coincides with a change of the runs' environment" in page
    assert page.count(f"environment: {SHOWN}</a>") == 2  # per member, to its first run
    assert client.get(url + "?format=json").json()["environment_change"]["members"] == 2

    Regression.objects.filter(pk=second.pk).update(environment_change=None)
    page = client.get(url).content.decode()
    assert "coincide" not in page  # one of two is not most
    assert page.count(f"environment: {SHOWN}</a>") == 1
