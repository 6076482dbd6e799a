"""Repo names are OWNER/NAME in GitHub's grammar wherever a repo enters; patterns (OWNER/*,
*) only in grants (runner.contract.repos)."""

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from benchsite.bisects.models import Source
from benchsite.jobs.submit import CommitRefused, job_commit
from benchsite.regressions.models import DetectionSettings, RepoBranches
from benchsite.results.ingest import UploadRefused, store_upload
from benchsite.results.models import Result, Run, RunSummary, Series, Upload, UploadToken
from runner.cli import main
from runner.contract.repos import (
    EXPECTED_REPO,
    RepoNameError,
    check_patterns,
    check_repo,
    covers,
    is_pattern,
    is_repo,
    repo_problem,
)
from tests.jobs.conftest import SMALL_SPEC
from tests.results.samples import META, record

URL = "/api/v3/results"


@pytest.mark.parametrize("repo", [
    "pytorch/ao", "a/b", "vllm-project/vllm", "pytorch/.github", "x/..a", "o/a.b_c-d",
    "a" * 39 + "/" + "n" * 100, "1/2", "old--name/repo",  # legacy owners with "--" exist
])
def test_repos_in_githubs_grammar(repo):
    assert is_repo(repo) and is_pattern(repo) and check_repo(repo, "here") == repo


@pytest.mark.parametrize("repo", [
    "", "pytorch", "pytorch/", "/ao", "pytorch/ao/x", "-pytorch/ao", "pytorch-/ao",
    "a" * 40 + "/ao", "pytorch/" + "n" * 101, "pytorch/.", "pytorch/..", "pytorch/\nvictim",
    "pytorch/ao\n", "pytorch/*", "*", "py torch/ao", "pytorch/a o", "py_torch/ao",
    "pytörch/ao", "pytorch/a*", "pytorch/?", None, 5, ["pytorch/ao"],
])
def test_anything_else_is_not_a_repo(repo):
    assert not is_repo(repo)
    with pytest.raises(RepoNameError, match=r"^--repo: .* is not a repo: expected OWNER/NAME"):
        check_repo(repo, "--repo")


@pytest.mark.parametrize(("pattern", "valid"), [
    ("*", True), ("pytorch/*", True), ("pytorch/ao", True), ("*/*", False), ("*/ao", False),
    ("pytorch/a*", False), ("py*/ao", False), ("py*", False), ("**", False),
    ("pytorch/?", False), ("pytorch/[ab]", False), ("-x/*", False), ("", False),
    ("pytorch", False),
])
def test_grant_patterns_are_a_repo_owner_star_or_star(pattern, valid):
    assert is_pattern(pattern) is valid


def test_messages_name_the_place_and_cut_the_value():
    with pytest.raises(RepoNameError) as refused:
        check_patterns(["pytorch/*", "x" * 500, "a/b/c"], "repos")
    message = str(refused.value)
    assert message.startswith("repos: 'xxxx") and "…" in message and len(message) < 800
    assert "repos: 'a/b/c' is not a repo pattern: expected OWNER/NAME, OWNER/* or *" in message
    assert repo_problem("x" * 500).count("x") < 120


@pytest.mark.parametrize(("held", "wanted", "covered"), [
    ("pytorch/*", "pytorch/ao", True), ("pytorch/*", "pytorch/*", True),
    ("pytorch/ao", "pytorch/ao", True), ("pytorch/ao", "pytorch/*", False),
    ("pytorch/ao", "pytorch/vision", False), ("pytorch/*", "victim/*", False),
    ("pytorch/*", "*", False), ("*", "*", True), ("*", "victim/*", True),
    ("pytorch/*", "PyTorch/ao", False),  # grants match as written, as they always have
])
def test_a_grant_covers_a_repo_or_a_narrower_grant(held, wanted, covered):
    assert covers(held, wanted) is covered


# The upload API


def post(api, token, body, query=""):
    return api.generic("POST", URL + query, json.dumps(body).encode(),
                       content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")


def nothing_stored():
    return not (Upload.objects.exists() or Run.objects.exists() or Series.objects.exists()
                or Result.objects.exists())


@pytest.mark.parametrize("query", ["?repo=pytorch/%0Avictim", "?repo=pytorch/*",
                                   "?repo=pytorch/ao%00", "?repo=pytorch/ao/x"])
def test_the_probes_bad_query_repos_are_refused(api, make_token, query):
    meta = {key: value for key, value in META.items() if key != "repo"}
    response = post(api, make_token("pytorch/*"), [record(**meta)], query)
    assert response.status_code == 400, response.json()
    # control characters are refused by the site's middleware before the upload reads them
    assert "repo" in json.dumps(response.json())
    assert nothing_stored()


@pytest.mark.parametrize("repo", ["pytorch/\nvictim", "pytorch/*"])
def test_the_request_metadatas_repo_is_checked_by_name(db, repo):
    meta = {key: value for key, value in META.items() if key != "repo"}
    with pytest.raises(UploadRefused) as refused:
        store_upload(json.dumps([record(**meta)]).encode(), metadata={"repo": repo})
    assert refused.value.errors == [
        f"records[0].repo (from the request): {repo!r} is not a repo: {EXPECTED_REPO}"]
    assert nothing_stored()


@pytest.mark.parametrize("repo", ["pytorch/\nvictim", "pytorch/*", "pytorch/ao/../x",
                                  "-x/ao", "pytorch/.."])
def test_a_records_bad_repo_is_refused_on_the_fast_and_the_general_path(
        api, make_token, repo):
    token = make_token("*")
    canonical = record(**{**META, "repo": repo})
    quirky = record(**{**META, "repo": repo}, unknown_field=1)  # the general parser's
    for body in ([canonical], [quirky]):
        response = post(api, token, body)
        assert response.status_code == 400
        assert response.json()["errors"][0].startswith(f"records[0].repo: {repo!r} is not a repo")
    assert nothing_stored()


def test_a_good_repo_is_still_stored(api, make_token):
    response = post(api, make_token("pytorch/*"), [record(**META)])
    assert response.status_code == 201 and Run.objects.get().repo == "pytorch/ao"


def test_a_token_never_allows_a_bad_repo_even_granting_everything():
    token = UploadToken(name="all", repos=["*"])
    assert token.allows("pytorch/ao") and not token.allows("pytorch/*")
    assert not token.allows("pytorch/\nvictim")


# The upload CLI


@pytest.mark.parametrize("repo", ["pytorch/\nvictim", "pytorch/*"])
def test_the_cli_refuses_a_bad_repo_before_sending(tmp_path, capsys, repo):
    path = tmp_path / "r.json"
    path.write_text(json.dumps([record(**{k: v for k, v in META.items() if k != "repo"})]))
    code = main(["upload", str(path), "--server", "http://127.0.0.1:9", "--token", "t",
                 "--repo", repo])
    assert code == 2
    assert f"error: nothing sent: --repo: {repo!r} is not a repo" in capsys.readouterr().err


def test_the_cli_names_githubs_variable(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GITHUB_REPOSITORY", "pytorch/a b")
    path = tmp_path / "r.json"
    path.write_text(json.dumps([record(head_branch="main", head_sha="a" * 40)]))
    assert main(["upload", str(path), "--server", "http://127.0.0.1:9", "--token", "t"]) == 2
    assert "GITHUB_REPOSITORY: 'pytorch/a b' is not a repo" in capsys.readouterr().err


# Tokens, jobs, sources, settings


def test_token_repos_are_checked_by_the_model_and_the_command(db):
    with pytest.raises(ValidationError) as refused:
        UploadToken(name="x", repos=["pytorch/*", "pytorch/a*"]).full_clean()
    assert "repos: 'pytorch/a*' is not a repo pattern" in str(refused.value.message_dict)
    with pytest.raises(CommandError, match=r"--repo: 'pytorch/\\nvictim' is not a repo pattern"):
        call_command("create_upload_token", "--repo", "pytorch/\nvictim")
    call_command("create_upload_token", "--repo", "*", "--repo", "pytorch/*")
    assert UploadToken.objects.get().repos == ["*", "pytorch/*"]


@pytest.mark.parametrize("repo", ["pytorch/\nvictim", "pytorch/*", "pytorch", "a/b/c"])
def test_a_job_with_a_bad_repo_is_refused(api, make_token, repo):
    with pytest.raises(CommitRefused, match=r"^repo: .* is not a repo: expected OWNER/NAME"):
        job_commit(repo, "", "")
    response = api.post("/api/v3/jobs", {"spec": SMALL_SPEC, "queue": "cpu", "repo": repo},
                        format="json", HTTP_AUTHORIZATION=f"Bearer {make_token('*')}")
    assert response.status_code == 400
    assert "is not a repo" in response.json()["repo"][0]


def test_job_commit_keeps_good_repos():
    assert job_commit(" pytorch/ao ", "", "")[0] == "pytorch/ao"


def test_sources_and_default_branch_settings_check_their_repo(db):
    source = Source(name="s", location="/tmp/x", repo="pytorch/*")
    with pytest.raises(ValidationError, match=r"repo: 'pytorch/\*' is not a repo"):
        source.clean()
    row = RepoBranches(settings=DetectionSettings.load(), repo="meta/a*", branches="main")
    with pytest.raises(ValidationError) as refused:
        row.clean()
    assert "is not a repo pattern" in refused.value.message_dict["repo"][0]
    RepoBranches(settings=DetectionSettings.load(), repo="meta/*", branches="main").clean()


# Queries and pages


@pytest.mark.parametrize("url", ["/api/v3/results", "/api/v3/runs", "/api/v3/jobs",
                                 "/api/v3/bisects"])
def test_a_bad_repo_filter_is_a_400_naming_it(api, url):
    response = api.get(url, {"repo": "pytorch/*"})
    assert response.status_code == 400
    assert "is not a repo" in json.dumps(response.json()), response.json()
    assert api.get(url, {"repo": "pytorch/ao"}).status_code == 200


@pytest.mark.parametrize("path", ["/", "/quantization/", "/kernels/", "/compilers/",
                                  "/instructions/", "/trends/", "/explorer/", "/compare/",
                                  "/regressions/", "/jobs/", "/recipes/"])
def test_pages_never_fail_on_a_bad_repo_nor_on_one_stored_before(api, make_token, client, path):
    assert post(api, make_token("pytorch/*"), [record(**META)]).status_code == 201
    legacy = "legacy repo\n"  # stored before names were checked: read, never refused
    for model in (Run, Series, RunSummary):
        model.objects.update(repo=legacy)
    Upload.objects.update(repos=[legacy])
    for repo in (None, legacy, "pytorch/\nvictim", "pytorch/*", "x" * 300):
        response = client.get(path, {} if repo is None else {"repo": repo})
        assert response.status_code in (200, 302, 400, 404), (repo, response.status_code)
    assert client.get(f"/runs/{Run.objects.get().pk}/").status_code == 200


def test_a_percent_in_a_refused_repo_is_shown_as_it_is(api):
    response = api.get("/api/v3/runs", {"repo": "%s/%(x)d"})
    assert response.status_code == 400
    assert "'%s/%(x)d' is not a repo" in json.dumps(response.json())
