"""`POST /api/v3/bisects` for A/B try jobs, `GET /api/v3/bisects` (a page, newest first,
filtered; the same read rules as every API read) and the OpenAPI schema of both. Nothing runs
here: the task's send is recorded, not made."""

from __future__ import annotations

import pytest
import yaml
from django.contrib.auth.models import Permission, User

from benchsite.bisects import tasks
from benchsite.bisects.models import Bisect, Source
from runner.sources import demo
from tests.jobs.conftest import sending_to

pytestmark = pytest.mark.django_db
# A start's task is sent once its transaction commits: the tests of 201 and 202 commit.
committing = pytest.mark.django_db(transaction=True)
UNREACHABLE = "redis://127.0.0.1:9/0"  # nothing listens on the discard port


@pytest.fixture
def sent(monkeypatch):
    """The bisects whose task was sent (to no worker)."""
    ids = []
    monkeypatch.setattr(tasks.run_bisect, "apply_async",
                        lambda args, queue: ids.append((args[0], queue)))
    return ids


def ab(**fields):
    return {"kind": "ab", "spec": demo.SPEC, "source": "demo", "base": "main~3",
            "head": "main", **fields}


def post(api, body, token=None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return api.post("/api/v3/bisects", body, format="json", **headers)


@committing
def test_a_try_job_from_the_api_is_queued_on_its_queue(source, api, make_token, sent):
    response = post(api, ab(queue="cuda"), make_token("demo/pkg"))
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["kind"] == "ab" and body["state"] == "pending" and body["steps"] == []
    assert (body["good_ref"], body["bad_ref"]) == ("main~3", "main")
    assert body["branch"] == f"try/{body['id']}" and body["queue"] == "cuda"
    assert body["source"] == "demo" and body["head_source"] is None
    assert body["repo"] == "demo/pkg" and body["enqueued_at"] is not None
    assert body["cells"] == ["custom/demo_mlp/eager/eval/float32/cpu/bsdefault"]
    assert sent == [(body["id"], "cuda")]
    bisect = Bisect.objects.get(pk=body["id"])
    assert bisect.kind == "ab" and bisect.submitted_token.name == "ci"
    assert api.get(body["url"]).status_code == 200  # its page


@committing
def test_a_try_job_of_two_sources_needs_both_repos(source, api, make_token, sent):
    Source.objects.create(name="fork", location=source.location, repo="someone/pkg")
    refused = post(api, ab(head_source="fork"), make_token("demo/pkg"))
    assert refused.status_code == 403
    assert refused.json()["detail"] == "token 'ci' may not run bisects for 'someone/pkg'"
    response = post(api, ab(head_source="fork"), make_token("demo/pkg", "someone/pkg"))
    assert response.status_code == 201 and response.json()["head_source"] == "fork"
    unknown = post(api, ab(head_source="nowhere"), make_token("demo/pkg"))
    assert unknown.status_code == 400 and "source 'nowhere': no such source" in \
        unknown.json()["detail"]


def test_a_try_job_needs_its_fields_and_not_a_bisects(source, api, make_token):
    token = make_token("demo/pkg")
    missing = post(api, {"kind": "ab", "spec": demo.SPEC, "source": "demo"}, token)
    assert missing.status_code == 400
    assert "give spec + source + base + head (missing: base, head)" in str(missing.json())
    mixed = post(api, ab(good="a", regression=3), token)
    assert mixed.status_code == 400
    assert "kind 'ab': does not take good, regression" in str(mixed.json())
    crossed = post(api, {"spec": demo.SPEC, "source": "demo", "good": "a", "bad": "b",
                         "head": "c"}, token)
    assert "kind 'bisect': does not take head" in str(crossed.json())
    assert post(api, ab(kind="abc"), token).status_code == 400
    bad_spec = post(api, ab(spec="family: nope\n"), token)
    assert bad_spec.status_code == 400
    two_cells = demo.SPEC.replace("backends: [eager]", "backends: [eager, aot_eager]")
    none = post(api, ab(spec=two_cells, cells="inductor"), token)
    assert "selects none of the spec's 2 cells" in none.json()["detail"]
    assert not Bisect.objects.exists()


@committing
def test_a_try_job_needs_submit_jobs_or_the_permission(source, api, make_token, sent):
    refused = post(api, ab(), make_token("demo/pkg", scopes=["upload", "read"]))
    assert refused.status_code == 403 and "no 'submit_jobs' scope" in refused.json()["detail"]
    queue = post(api, ab(queue="cpu"), make_token("demo/pkg", queues=["cuda"]))
    assert queue.status_code == 403 and "may submit only to ['cuda']" in queue.json()["detail"]
    assert post(api, ab()).status_code == 401  # anonymous
    user = User.objects.create_user("perf")
    api.force_authenticate(user)
    assert post(api, ab()).status_code == 403
    user.user_permissions.add(Permission.objects.get(codename="add_bisect"))
    api.force_authenticate(User.objects.get(pk=user.pk))
    response = post(api, ab())
    assert response.status_code == 201
    assert Bisect.objects.get().submitted_by == user


@committing
def test_a_start_the_broker_cannot_take_answers_202(source, api, make_token):
    with sending_to(UNREACHABLE):
        response = post(api, ab(), make_token("demo/pkg"))
    assert response.status_code == 202, response.json()
    assert response.json()["enqueued_at"] is None
    assert "not queued: the broker is unreachable" in response.json()["progress"]


def make(source, n=1, **fields):
    defaults = {"spec_name": "demo.yml", "spec_yaml": demo.SPEC, "family": "compilers",
                "cells": [{"key": "k", "cell": {}}], "good_ref": "a", "bad_ref": "b"}
    return [Bisect.objects.create(source=source, **{**defaults, **fields}) for _ in range(n)]


def test_the_list_is_newest_first_paged_and_filtered(source, api, make_token):
    other = Source.objects.create(name="ao", location="/srv/src/ao", repo="pytorch/ao")
    culprit = make(source, state="culprit", culprit_sha="c" * 40)[0]
    tried = make(source, kind="ab", state="finished")[0]
    theirs = make(other, n=50)
    listed = api.get("/api/v3/bisects").json()
    assert [item["id"] for item in listed["results"]] == [b.pk for b in reversed(theirs)]
    assert listed["next"] and listed["previous"] is None
    assert "steps" not in listed["results"][0]
    rest = api.get(listed["next"]).json()
    assert [item["id"] for item in rest["results"]] == [tried.pk, culprit.pk]
    assert rest["results"][1]["culprit_sha"] == "c" * 40

    def ids(**query):
        response = api.get("/api/v3/bisects", query)
        assert response.status_code == 200, response.json()
        return [item["id"] for item in response.json()["results"]]

    assert ids(state="culprit") == [culprit.pk]
    assert ids(kind="ab") == [tried.pk]
    assert ids(repo="demo/pkg") == [tried.pk, culprit.pk]
    assert ids(source="demo", kind="bisect") == [culprit.pk]
    assert ids(repo="pytorch/ao", state="pending")[-1] == theirs[0].pk
    assert ids(regression=5) == []
    head = make(other, kind="ab", head_source=source)[0]
    assert ids(repo="demo/pkg") == [head.pk, tried.pk, culprit.pk]  # the head's repo too
    bad = api.get("/api/v3/bisects", {"state": "done"})
    assert bad.status_code == 400 and "state" in bad.json()
    assert api.get("/api/v3/bisects", {"regression": "9" * 30}).status_code == 400


def test_the_list_follows_the_read_rules(source, api, make_token, settings):
    make(source)
    settings.BENCH_LOGIN_REQUIRED = True
    assert api.get("/api/v3/bisects").status_code == 401
    assert api.get(f"/api/v3/bisects/{Bisect.objects.get().pk}").status_code == 401
    for scopes in (["read"], ["upload"]):
        token = make_token("demo/pkg", scopes=scopes, name=scopes[0])
        response = api.get("/api/v3/bisects", HTTP_AUTHORIZATION=f"Bearer {token}")
        assert response.status_code == 200 and len(response.json()["results"]) == 1
    jobs_only = make_token("demo/pkg", scopes=["submit_jobs"], name="submitter")
    refused = api.get("/api/v3/bisects", HTTP_AUTHORIZATION=f"Bearer {jobs_only}")
    assert refused.status_code == 403 and "'read' or 'upload' scope" in refused.json()["detail"]
    user = User.objects.create_user("someone")
    api.force_authenticate(user)
    assert api.get("/api/v3/bisects").status_code == 403  # not a viewer
    user.user_permissions.add(Permission.objects.get(codename="view_result"))
    api.force_authenticate(User.objects.get(pk=user.pk))
    assert api.get("/api/v3/bisects").status_code == 200


def test_the_schema_documents_try_jobs_and_the_list(api):
    schema = yaml.safe_load(api.get("/api/schema/").content)
    bisects = schema["paths"]["/api/v3/bisects"]
    start = bisects["post"]
    body = start["requestBody"]["content"]["application/json"]["schema"]["$ref"].split("/")[-1]
    fields = schema["components"]["schemas"][body]["properties"]
    assert {"kind", "base", "head", "head_source", "regression", "good", "bad"} <= set(fields)
    assert set(start["responses"]) == {"201", "202"}
    assert start["summary"] == "Start a bisect or an A/B try job"
    listing = bisects["get"]
    assert {"state", "kind", "repo", "source", "regression", "cursor"} <= {
        parameter["name"] for parameter in listing["parameters"]}
    page = listing["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    items = schema["components"]["schemas"][page.split("/")[-1]]["properties"]["results"]
    item = schema["components"]["schemas"][items["items"]["$ref"].split("/")[-1]]
    assert {"state", "culprit_sha", "outcome", "enqueued_at"} <= set(item["properties"])
    assert "steps" not in item["properties"]
    detail = schema["paths"]["/api/v3/bisects/{id}"]["get"]["responses"]["200"]
    detail = detail["content"]["application/json"]["schema"]["$ref"].split("/")[-1]
    assert "steps" in schema["components"]["schemas"][detail]["properties"]
