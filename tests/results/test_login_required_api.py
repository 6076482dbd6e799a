"""BENCH_LOGIN_REQUIRED covers the API: a viewer's session or a token with the read or
upload scope, for every endpoint; the OpenAPI schema says so."""

import json

import pytest
import yaml
from django.contrib.auth.models import Permission, User

from tests.results.samples import META, record

READS = ["/api/v3/results", "/api/v3/results?format=csv", "/api/v3/runs", "/api/v3/runs/1",
         "/api/v3/uploads/1", "/api/v3/environment-changes", "/api/v3/jobs", "/api/v3/jobs/1",
         "/api/v3/compare?repo=pytorch/ao&base=a&head=b"]


@pytest.fixture
def login_required(settings):
    settings.BENCH_LOGIN_REQUIRED = True


@pytest.fixture
def stored(api, make_token):
    """One upload, so that the detail endpoints have something to hide."""
    response = api.generic("POST", "/api/v3/results", json.dumps([record(**META)]).encode(),
                           content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {make_token('pytorch/ao')}")
    assert response.status_code == 201


def get(api, url, secret=None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {secret}"} if secret else {}
    return api.get(url, **headers)


@pytest.mark.parametrize("url", READS)
def test_anonymous_clients_get_nothing(api, stored, login_required, url):
    response = get(api, url)
    assert response.status_code == 401, (url, response.content[:300])
    assert response["WWW-Authenticate"] == "Bearer"
    assert b"pytorch/ao" not in response.content


def test_read_and_upload_tokens_read(api, stored, make_token, login_required):
    for scopes in (["read"], ["upload"]):
        secret = make_token("pytorch/ao", scopes=scopes, name=scopes[0])
        csv = get(api, "/api/v3/results?format=csv", secret)
        assert csv.status_code == 200 and b"pytorch/ao" in b"".join(csv.streaming_content)
        assert get(api, "/api/v3/runs", secret).json()["results"][0]["repo"] == "pytorch/ao"
        assert get(api, "/api/v3/jobs", secret).status_code == 200


def test_a_token_without_a_reading_scope_is_refused(api, stored, make_token, login_required):
    secret = make_token("pytorch/ao", scopes=["submit_jobs"], queues=["cpu"])
    response = get(api, "/api/v3/runs", secret)
    assert response.status_code == 403 and "'read' or 'upload' scope" in response.json()["detail"]


def test_sessions_need_the_viewers_permission(api, stored, login_required):
    user = User.objects.create_user("someone", password="pw")
    api.force_login(user)
    refused = api.get("/api/v3/results")
    assert refused.status_code == 403 and "viewers role" in refused.json()["detail"]
    user.user_permissions.add(Permission.objects.get(codename="view_result"))
    api.force_login(User.objects.get(pk=user.pk))
    for url in ("/api/v3/results", "/api/v3/runs", "/api/v3/jobs"):
        assert api.get(url).status_code == 200, url


def test_uploads_still_need_only_their_token(api, make_token, login_required):
    secret = make_token("pytorch/ao", scopes=["upload"])
    response = api.generic("POST", "/api/v3/results", json.dumps([record(**META)]).encode(),
                           content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 201


def test_without_the_setting_reads_are_open(api, stored):
    assert api.get("/api/v3/results?format=csv").status_code == 200


def security(api, path, method):
    schema = yaml.safe_load(api.get("/api/schema/").content)
    return schema["paths"][path][method]["security"]


def test_the_schema_documents_the_requirement(api, db, settings):
    settings.BENCH_LOGIN_REQUIRED = False
    assert {} in security(api, "/api/v3/results", "get")
    assert security(api, "/api/v3/results", "post") == [{"uploadToken": []}]
    settings.BENCH_LOGIN_REQUIRED = True
    # the schema and its docs stay public, and say what every endpoint needs
    for path in ("/api/v3/results", "/api/v3/runs", "/api/v3/jobs", "/api/v3/compare"):
        required = security(api, path, "get")
        assert {} not in required and {"uploadToken": []} in required, path
    assert "BENCH_LOGIN_REQUIRED" in api.get("/api/schema/").content.decode()
    assert api.get("/api/docs/").status_code == 200
