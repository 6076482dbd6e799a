"""`/compare/`: the newest two commits of a repo's default branch, never a dead end."""

import json

import pytest
from django.core.management import call_command

from benchsite.results.demo import sha
from benchsite.results.ingest.upload import store_upload
from benchsite.results.models import Run
from tests.results.samples import MINIMAL, record


@pytest.fixture
def demo(db):
    call_command("load_demo", "--nights", "3")


def test_a_bare_compare_opens_the_newest_two_nightlies(client, demo):
    response = client.get("/compare/")
    assert response.status_code == 302
    assert response["Location"] == f"/compare/{sha(1)}...{sha(2)}?repo=pytorch%2Fao"
    assert client.get(response["Location"]).status_code == 200
    as_json = client.get("/compare/?format=json&status=regression")["Location"]
    assert as_json == (f"/compare/{sha(1)}...{sha(2)}?format=json&status=regression"
                       "&repo=pytorch%2Fao")
    assert client.get(as_json).json()["filters"]["status"] == "regression"
    # Another repo, and the nav links to it.
    other = client.get("/compare/?repo=pytorch/pytorch")["Location"]
    assert other.endswith("?repo=pytorch%2Fpytorch")
    assert 'href="/compare/">Compare</a>' in client.get("/").content.decode()


def test_pull_request_runs_are_never_the_newest_nightlies(client, demo):
    run = Run.objects.filter(repo="pytorch/ao", head_sha=sha(2)).first()
    Run.objects.filter(pk=run.pk).update(head_branch="pr/123")
    Run.objects.filter(repo="pytorch/ao", head_sha=sha(2)).exclude(pk=run.pk).delete()
    assert client.get("/compare/")["Location"].startswith(f"/compare/{sha(0)}...{sha(1)}?")


def test_an_unknown_repo_or_a_single_commit_says_why(client, demo):
    unknown = client.get("/compare/?repo=nope/nope")
    assert unknown.status_code == 404
    assert "nope/nope" in unknown.content.decode()
    assert "nope/nope" in client.get("/compare/?repo=nope/nope&format=json").json()["error"]
    Run.objects.filter(repo="pytorch/ao").exclude(head_sha=sha(2)).delete()
    single = client.get("/compare/?repo=pytorch/ao")
    assert single.status_code == 404
    assert "no two commits" in single.content.decode()



def upload_cpu_benchmark(sha_: str, after: Run, value: float) -> None:
    """The README's CPU upload: another benchmark, on main, an hour after `after`."""
    body = json.dumps([record(MINIMAL, timestamp=int(after.timestamp.timestamp()) + 3600,
                              metric={"name": "latency", "benchmark_values": [value]})])
    store_upload(body.encode(), metadata={"repo": "pytorch/ao", "head_branch": "main",
                                          "head_sha": sha_})


def test_a_newer_upload_of_another_benchmark_is_skipped_over(client, demo):
    """The newest commit measured nothing the nightlies measured, so the nightlies are
    compared (not "no common results")."""
    night = Run.objects.filter(repo="pytorch/ao", head_sha=sha(2)).latest("timestamp")
    upload_cpu_benchmark("c" * 40, after=night, value=1.0)
    assert Run.objects.filter(repo="pytorch/ao").latest("timestamp").head_sha == "c" * 40
    assert client.get("/compare/")["Location"].startswith(f"/compare/{sha(1)}...{sha(2)}?")
    # Once a second commit measures it too, that pair is the newest with results in common.
    upload_cpu_benchmark("d" * 40, after=Run.objects.get(head_sha="c" * 40), value=2.0)
    assert client.get("/compare/")["Location"].startswith(f"/compare/{'c' * 40}...{'d' * 40}?")
