"""A missing run, job, regression, group, report or bisect answers 404 as JSON when
`?format=json` is asked, DEBUG on (as `scripts/run` serves) or off; without it, HTML."""

import json

import pytest
from django.test import override_settings

from benchsite.results.ingest import store_upload
from benchsite.results.models import Run
from tests.results.samples import TORCHAO, record

pytestmark = pytest.mark.django_db
MISSING = [
    ("/regressions/99999/", "regression"),
    ("/regressions/groups/99999/", "alert group"),
    ("/regressions/reports/99999/", "report"),
    ("/runs/99999/", "run"),
    ("/jobs/99999/", "job"),
    ("/bisects/99999/", "bisect"),
]


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize(("url", "kind"), MISSING)
def test_a_missing_object_answers_json_when_asked(client, url, kind, debug):
    with override_settings(DEBUG=debug):
        response = client.get(url + "?format=json")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["status"] == 404
    assert body["error"] == f"There is no {kind} 99999: it was never stored or has been deleted."
    assert body["links"]


@pytest.mark.parametrize(("url", "kind"), MISSING)
def test_without_format_json_the_404_is_html(client, url, kind):
    response = client.get(url)
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
    assert f"There is no {kind} 99999" in response.content.decode()


def _one_run() -> Run:
    store_upload(json.dumps([record(TORCHAO, repo="pytorch/ao", head_branch="main",
                                    head_sha="a" * 40)]).encode())
    return Run.objects.get()


def test_a_comparison_that_cannot_be_made_answers_json_under_debug(client):
    _one_run()
    with override_settings(DEBUG=True):
        response = client.get(f"/compare/{'0' * 40}...{'a' * 40}?repo=pytorch/ao&format=json")
    assert response.status_code == 404 and response.json()["status"] == 404


def test_a_refused_parameter_answers_json_under_debug(client):
    run = _one_run()
    with override_settings(DEBUG=True):
        response = client.get(f"/runs/{run.pk}/?metric=nope&format=json")
    assert response.status_code == 400
    assert response.json()["status"] == 400 and response.json()["parameter"] == "metric"
