"""The site's error pages say what went wrong and where to go (the page's default view), as
HTML or, with ?format=json, as JSON; the favicon answers at /favicon.ico and in the base
template; every page answers ?format=json."""

import json

import pytest
from django.contrib.staticfiles import finders
from django.test import Client, override_settings

from benchsite.results.ingest import store_upload
from benchsite.results.models import Run
from tests.results.samples import TORCHAO, record

pytestmark = pytest.mark.django_db
NOW = {"repo": "pytorch/ao", "head_branch": "main", "head_sha": "a" * 40}


def test_an_unknown_path_names_it_and_links_home(client):
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    html = response.content.decode()
    assert "<h1>Not found</h1>" in html and "There is no page at /no-such-page/" in html
    assert '<a href="/">The home page</a>' in html
    assert 'rel="icon"' in html  # the site's own page, with its navigation
    answer = client.get("/no-such-page/?format=json")
    assert answer.status_code == 404 and answer.json() == {
        "error": "There is no page at /no-such-page/: check the address.", "status": 404,
        "links": [{"text": "the home page", "url": "/"}]}


@pytest.mark.parametrize(("url", "kind", "listing", "listed_at"), [
    ("/runs/999999/", "run", "The latest runs", "/"),
    ("/jobs/999999/", "job", "All jobs", "/jobs/"),
    ("/regressions/999999/", "regression", "All regressions", "/regressions/"),
    ("/regressions/groups/999999/", "alert group", "All regressions", "/regressions/"),
    ("/regressions/reports/999999/", "report", "All reports", "/regressions/reports/"),
])
def test_a_missing_object_says_which_and_links_its_list(client, url, kind, listing, listed_at):
    response = client.get(url)
    assert response.status_code == 404
    html = response.content.decode()
    assert f"There is no {kind} 999999: it was never stored or has been deleted." in html
    assert f'<a href="{listed_at}">{listing}</a>' in html
    assert client.get(url + "?format=json").json()["error"].startswith(f"There is no {kind}")


def test_a_comparison_that_cannot_be_made_says_why(client):
    store_upload(json.dumps([record(TORCHAO, **NOW)]).encode())
    response = client.get(f"/compare/{'0' * 40}...{'a' * 40}?repo=pytorch/ao")
    assert response.status_code == 404
    html = response.content.decode()
    assert "0000000000" in html and '<a href="/">The latest runs</a>' in html


def test_a_refused_parameter_is_named_with_the_page_without_it(client):
    store_upload(json.dumps([record(TORCHAO, **NOW)]).encode())
    run = Run.objects.get()
    response = client.get(f"/runs/{run.pk}/?metric=nope&model=int8&format=json")
    assert response.status_code == 400
    assert response.json()["error"].startswith("metric: 'nope' is not one of")


def test_a_server_error_is_the_sites_page_and_json_for_json(db):
    from django.urls import path

    from benchsite import urls

    def boom(request):
        raise RuntimeError("boom")

    class Urls:
        urlpatterns = [path("boom/", boom), *urls.urlpatterns]
        handler500 = urls.handler500

    with override_settings(ROOT_URLCONF=Urls):
        client = Client(raise_request_exception=False)
        response = client.get("/boom/")
        assert response.status_code == 500
        assert b"<h1>Server error</h1>" in response.content and b"boom" not in response.content
        answer = client.get("/boom/?format=json")
        assert answer.status_code == 500 and answer.json()["status"] == 500


def test_the_favicon_answers_at_the_root_and_is_linked(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 200 and response["Content-Type"] == "image/x-icon"
    assert response.content[:4] == b"\0\0\1\0"  # an icon resource
    html = client.get("/").content.decode()
    assert 'rel="icon" href="/static/benchsite/favicon.ico"' in html
    assert 'href="/static/benchsite/favicon.svg" type="image/svg+xml"' in html
    assert finders.find("benchsite/favicon.svg")


def test_every_page_answers_json(client):
    store_upload(json.dumps([record(TORCHAO, **NOW)]).encode())
    run = Run.objects.get()
    for url in ["/", "/quantization/", "/kernels/", "/compilers/", "/compilers/models/",
                "/instructions/", "/trends/", "/explorer/", f"/runs/{run.pk}/", "/jobs/",
                "/regressions/", "/regressions/reports/", "/recipes/"]:
        response = client.get(url + "?format=json")
        assert response.status_code == 200, url
        assert response["Content-Type"] == "application/json", url
        page = response.json()
        assert {"title", "filters", "tables", "figures"} <= set(page), url


def test_a_refused_parameter_page_links_the_page_without_it(rf):
    from dashboards.errors import bad_parameter
    from dashboards.state import BadParameter

    request = rf.get("/kernels/", {"sha": "zzz", "dtype": "bfloat16"})
    response = bad_parameter(request, BadParameter("sha", "'zzz' is not one of ..."))
    html = response.content.decode()
    assert response.status_code == 400 and "Change or remove <code>sha</code>." in html
    assert '<a href="/kernels/?dtype=bfloat16">This page without sha</a>' in html
    assert '<a href="/kernels/">This page&#x27;s default view</a>' in html
    request = rf.get("/kernels/", {"sha": "zzz", "format": "csv"})
    answer = json.loads(bad_parameter(request, BadParameter("sha", "gone")).content)
    assert answer["error"] == "sha: gone" and answer["parameter"] == "sha"
