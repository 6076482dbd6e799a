"""`python -m runner upload` against a live server."""

import json
import urllib.error
import urllib.request

import pytest

from benchsite.results.models import Result, Run
from runner.cli import main, upload
from tests.results.samples import INDUCTOR_ACCURACY, TORCHAO, record

GITHUB_ENV = {"GITHUB_REPOSITORY": "pytorch/ao", "GITHUB_SHA": "f" * 40,
              "GITHUB_REF_NAME": "main", "GITHUB_RUN_ID": "123", "GITHUB_RUN_ATTEMPT": "2",
              "GITHUB_WORKFLOW": "nightly"}

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def github(monkeypatch):
    for key, value in GITHUB_ENV.items():
        monkeypatch.setenv(key, value)


def test_uploads_json_lines_with_github_metadata_and_repeats_safely(
        live_server, make_token, tmp_path, github, capsys):
    path = tmp_path / "results.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [record(TORCHAO),
                                                       record(INDUCTOR_ACCURACY)]))
    token = make_token("pytorch/ao")
    argv = ["upload", str(path), "--server", live_server.url, "--token", token]
    assert main(argv) == 0
    assert "stored as upload" in capsys.readouterr().out
    run = Run.objects.get()
    assert (run.repo, run.head_sha, run.head_branch, run.workflow_id, run.run_attempt,
            run.name) == ("pytorch/ao", "f" * 40, "main", 123, 2, "nightly")
    assert main(argv) == 0
    assert "already stored" in capsys.readouterr().out
    assert Result.objects.count() == 2


def test_options_override_the_environment(live_server, make_token, tmp_path, github):
    path = tmp_path / "results.json"
    path.write_text(json.dumps([record(TORCHAO)]))
    assert main(["upload", str(path), "--server", live_server.url, "--token",
                 make_token("pytorch/ao"), "--head-sha", "a" * 40, "--job-id", "77"]) == 0
    run = Run.objects.get()
    assert (run.head_sha, run.job_id) == ("a" * 40, 77)


def test_a_refused_upload_prints_every_problem(live_server, make_token, tmp_path, github,
                                               capsys):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([record(TORCHAO, model={})]))
    assert main(["upload", str(path), "--server", live_server.url, "--token",
                 make_token("pytorch/ao")]) == 1
    err = capsys.readouterr().err
    assert "HTTP 400" in err and "records[0].model.name: required" in err
    assert Result.objects.count() == 0


def test_transient_failures_are_retried_with_the_same_key(live_server, make_token, monkeypatch,
                                                          github):
    real = urllib.request.urlopen
    keys = []

    def flaky(request, timeout):
        keys.append(request.headers["Idempotency-key"])
        if len(keys) == 1:
            raise urllib.error.URLError("connection reset")
        return real(request, timeout=timeout)

    monkeypatch.setattr(urllib.request, "urlopen", flaky)
    result = upload.upload_records([record(TORCHAO)], live_server.url,
                                   make_token("pytorch/ao"), metadata=None)
    assert result.created and len(keys) == 2 and keys[0] == keys[1]


def test_missing_token_is_an_error(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("BENCH_UPLOAD_TOKEN", raising=False)
    assert main(["upload", str(tmp_path / "x.json"), "--server", "http://127.0.0.1:9"]) == 2
    assert "--token" in capsys.readouterr().err
