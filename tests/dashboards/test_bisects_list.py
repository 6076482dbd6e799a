"""`/bisects/`: every bisect and try job, newest first, with the API list's filters as
dropdowns in the URL, a page at a time, as JSON too; the nav links to it."""

import pytest

from benchsite.bisects.models import Bisect, Source

pytestmark = pytest.mark.django_db


def make(source, n=1, **fields):
    defaults = {"spec_name": "demo.yml", "spec_yaml": "family: compilers\n",
                "family": "compilers", "cells": [{"key": "k", "cell": {}}], "good_ref": "a",
                "bad_ref": "b"}
    return [Bisect.objects.create(source=source, **{**defaults, **fields}) for _ in range(n)]


@pytest.fixture
def made():
    demo = Source.objects.create(name="demo", location="/srv/src/demo", repo="demo/pkg")
    other = Source.objects.create(name="ao", location="/srv/src/ao", repo="pytorch/ao")
    culprit = make(demo, state="culprit", culprit_sha="c" * 40, metric="latency")[0]
    tried = make(demo, kind="ab", state="finished", queue="cuda")[0]
    theirs = make(other, n=50)
    return {"culprit": culprit, "tried": tried, "theirs": theirs, "demo": demo}


def ids(client, **query) -> list[int]:
    answer = client.get("/bisects/", {**query, "format": "json"})
    assert answer.status_code == 200, answer.content
    table = answer.json()["tables"][0]
    return [row[table["columns"].index("bisect")] for row in table["rows"]]


def test_the_list_is_newest_first_paged_and_filtered_like_the_api(client, made):
    theirs, tried, culprit = made["theirs"], made["tried"], made["culprit"]
    assert ids(client) == [b.pk for b in reversed(theirs)]  # a page of 50
    assert ids(client, page="2") == [tried.pk, culprit.pk]
    assert ids(client, state="culprit") == [culprit.pk]
    assert ids(client, kind="ab") == [tried.pk]
    assert ids(client, repo="demo/pkg") == [tried.pk, culprit.pk]
    assert ids(client, source="demo", kind="bisect") == [culprit.pk]
    assert ids(client, queue="cuda") == [tried.pk]
    assert ids(client, regression="5") == []
    head = make(theirs[0].source, kind="ab", head_source=made["demo"])[0]
    assert ids(client, repo="demo/pkg") == [head.pk, tried.pk, culprit.pk]  # the head's too
    data = client.get("/bisects/", {"state": "culprit", "format": "json"}).json()
    assert data["filters"]["state"] == "culprit" and data["filters"]["page"] == 1
    row = dict(zip(data["tables"][0]["columns"], data["tables"][0]["rows"][0], strict=True))
    assert (row["culprit"], row["repo"], row["metric"]) == ("c" * 40, "demo/pkg", "latency")
    bad = client.get("/bisects/", {"state": "done", "format": "json"})
    assert bad.status_code == 400 and "state" in bad.content.decode()


def test_the_page_has_dropdowns_links_and_paging(client, made):
    html = client.get("/bisects/?repo=demo/pkg").content.decode()
    assert '<select name="state">' in html and '<select name="repo">' in html
    assert '<option value="demo/pkg" selected>' in html
    assert f'href="/bisects/{made["culprit"].pk}/"' in html
    assert f'href="/bisects/{made["theirs"][0].pk}/"' not in html  # filtered out
    paged = client.get("/bisects/").content.decode()
    assert 'rel="next"' in paged and "page=2" in paged
    noted = client.get("/bisects/?state=done").content.decode()
    assert "state: &#x27;done&#x27; is not offered here" in noted
    assert 'href="/bisects/">Bisects</a>' in client.get("/").content.decode()  # in the nav
