"""A NUL (or another control character) in the path or in a query parameter is a 400, the
site's own page or its JSON, on every page and API endpoint: never a 500 (PostgreSQL refuses
a NUL in a string; SQLite does not, so this matters on PostgreSQL)."""

from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.urls.resolvers import RoutePattern

pytestmark = pytest.mark.django_db
SAMPLES = {"IntConverter": 1, "StringConverter": "x", "SlugConverter": "x", "PathConverter": "x"}
SAMPLES["FamilyConverter"] = "quantization"  # dashboards.families: a registered page
# The admin's hundred routes are Django's; these stand for them.
ADMIN = ["/admin/", "/admin/login/", "/admin/results/run/", "/admin/results/run/1/change/"]


def _routes(resolver: URLResolver, namespace: str = ""):
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            if entry.namespace == "admin":
                continue
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from _routes(entry, inner)
        else:
            yield namespace, entry


def _sample_url(namespace: str, entry: URLPattern) -> str:
    """The route with a sample value for each of its arguments."""
    if isinstance(entry.pattern, RoutePattern):
        kwargs = {name: SAMPLES[type(converter).__name__]
                  for name, converter in entry.pattern.converters.items()}
    else:
        kwargs = dict.fromkeys(entry.pattern.regex.groupindex, "a")
    if entry.name:
        return reverse(namespace + entry.name, kwargs=kwargs)
    return "/" + str(entry.pattern)  # favicon.ico


URLS = sorted({_sample_url(namespace, entry) for namespace, entry in _routes(get_resolver())}
              | set(ADMIN))


def _with_nul_in_path(url: str) -> str:
    stem = url.rstrip("/")
    return stem + "%00x" + url[len(stem):]


def test_every_route_is_covered():
    assert {"/", "/runs/1/", "/compare/a...a", "/api/v3/results", "/api/docs/",
            "/regressions/1/triage", "/favicon.ico"} <= set(URLS)


@pytest.mark.parametrize("url", URLS)
def test_a_nul_in_the_path_is_a_400(client, url):
    response = client.get(_with_nul_in_path(url))
    assert response.status_code == 400, (url, response.status_code)


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("query", ["repo=x%00", "%00=1", "format=json&base=a%00b",
                                   "arch=%1b[31m"])
def test_a_control_character_in_a_query_parameter_is_a_400(client, url, query):
    response = client.get(f"{url}?{query}")
    assert response.status_code == 400, (url, query, response.status_code)


def test_a_page_answers_with_its_400_page_naming_the_parameter(client):
    response = client.get("/compare/a...b/?repo=x%00&arch=H100")
    html = response.content.decode()
    assert response.status_code == 400 and "<h1>Bad request</h1>" in html
    assert "contains a control character" in html
    assert 'href="/compare/a...b/?arch=H100"' in html  # the same page without it
    answer = client.get("/compare/a...b/?repo=x%00&format=json").json()
    assert answer["status"] == 400 and answer["parameter"] == "repo"


def test_the_api_answers_json(client):
    answer = client.get("/api/v3/runs?repo=x%00")
    assert answer.status_code == 400 and answer["Content-Type"] == "application/json"
    assert answer.json()["parameter"] == "repo"
    path = client.get("/api/v3/runs/1%00")
    assert path.status_code == 400 and "control character" in path.json()["error"]


def test_a_bad_path_links_home_not_to_itself(client):
    response = client.get("/compare/%00...x/")
    html = response.content.decode()
    assert response.status_code == 400 and '<a href="/">The home page</a>' in html
    assert "\\x00" in html  # named, escaped


def test_ordinary_text_passes(client):
    assert client.get("/compare/a...b/?repo=pytorch/ao&arch=caf%C3%A9%20%E2%9C%93").status_code \
        == 404  # no such commits, but read
