"""Deleting an upload deletes exactly its own results; the run's other uploads stay whole,
and the same payload uploaded again is stored again."""

import json

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from benchsite.results.ingest import delete_uploads
from benchsite.results.models import Result, Run, RunSummary, Upload
from tests.results.samples import META, TORCHAO, record

FIRST = [record(**META), record(**META, model={**TORCHAO["model"], "name": "first-2"})]
LATER = [record(**{**META, "timestamp": META["timestamp"] + 60},
                model={**TORCHAO["model"], "name": "later"})]


def upload(api, secret, body):
    response = api.generic("POST", "/api/v3/results", json.dumps(body).encode(),
                           content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code in (200, 201), response.json()
    return response


@pytest.fixture
def two_uploads_one_run(api, make_token):
    secret = make_token("pytorch/ao")
    first = Upload.objects.get(pk=upload(api, secret, FIRST).json()["upload_id"])
    later = Upload.objects.get(pk=upload(api, secret, LATER).json()["upload_id"])
    run = Run.objects.get()
    assert run.upload == first and run.result_count == 3
    return secret, first, later, run


def test_deleting_the_first_upload_keeps_the_later_ones_results(api, client, two_uploads_one_run):
    secret, first, later, run = two_uploads_one_run
    client.force_login(User.objects.create_superuser("admin", password="pw"))
    page = reverse("admin:results_upload_delete", args=[first.pk])
    assert client.post(page, {"post": "yes"}).status_code == 302

    assert not Upload.objects.filter(pk=first.pk).exists()
    run.refresh_from_db()
    assert run.upload == later and run.result_count == 1
    assert run.timestamp.timestamp() == META["timestamp"] + 60  # its earliest result left
    assert list(Result.objects.values_list("upload_id", "series__model")) == [
        (later.pk, "later")]
    summary = RunSummary.objects.get(run=run)
    assert summary.count == 1

    again = upload(api, secret, FIRST)
    assert again.status_code == 201 and again.json()["records"] == 2
    assert Result.objects.filter(run=run).count() == 3
    run.refresh_from_db()
    assert run.result_count == 3 and RunSummary.objects.get(run=run).count == 3


def test_deleting_the_later_upload_keeps_the_run_with_its_first(two_uploads_one_run):
    _, first, later, run = two_uploads_one_run
    assert delete_uploads([later.pk]) == 1
    run.refresh_from_db()
    assert run.upload == first and run.result_count == 2
    assert set(Result.objects.values_list("upload_id", flat=True)) == {first.pk}


def test_a_run_left_empty_goes_with_its_uploads(client, two_uploads_one_run):
    client.force_login(User.objects.create_superuser("admin", password="pw"))
    _, first, later, _ = two_uploads_one_run
    action = client.post(reverse("admin:results_upload_changelist"),
                         {"action": "delete_selected", "_selected_action": [first.pk, later.pk],
                          "post": "yes"})
    assert action.status_code == 302
    assert (Upload.objects.count(), Run.objects.count(), Result.objects.count(),
            RunSummary.objects.count()) == (0, 0, 0, 0)
