"""What a job measures: a real commit on its branch, or nothing (the adhoc branch, a sha that
is the job's own name), whichever way it is submitted."""

import json

import pytest
from django.core.management import CommandError, call_command
from django_celery_beat.models import PeriodicTask

from benchsite.catalog.schedules import TASK
from benchsite.jobs import submit
from benchsite.jobs.models import Job
from benchsite.jobs.submit import CommitRefused, job_commit, submit_job
from tests.jobs.conftest import FAST_TIMING, SMALL_SPEC

pytestmark = pytest.mark.django_db(transaction=True)
SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(autouse=True)
def undelivered(monkeypatch):
    """Submitted cells stay pending: these tests look at what is recorded, not at runs."""
    monkeypatch.setattr(submit, "enqueue", lambda job: None)


def test_the_commit_rules():
    assert job_commit("", "", SHA.upper()) == ("pytorch/ao", "main", SHA)
    assert job_commit("pytorch/pytorch", "release/2.9", SHA) == (
        "pytorch/pytorch", "release/2.9", SHA)
    assert job_commit("", "", "") == ("pytorch/ao", "adhoc", "")
    with pytest.raises(CommitRefused, match="head_sha: branch 'main' needs the commit") as error:
        job_commit("", "main", "")
    assert error.value.field == "head_sha"
    with pytest.raises(CommitRefused, match=r"head_sha: 'abc123': expected a commit's full hex"):
        job_commit("", "", "abc123")
    with pytest.raises(CommitRefused, match="repo: 'ao' is not a repo: expected OWNER/NAME"):
        job_commit("ao", "", SHA)


def test_a_job_without_a_commit_is_adhoc_and_its_sha_is_its_own_name():
    job = submit_job(SMALL_SPEC, name="small.yml", queue="cpu", via="command")
    assert (job.head_branch, job.head_sha, job.adhoc) == ("adhoc", f"adhoc-job-{job.pk}", True)
    assert job.run_metadata()["head_sha"] == f"adhoc-job-{job.pk}"
    with_commit = submit_job(SMALL_SPEC, name="small.yml", queue="cpu", via="command",
                             head_sha=SHA)
    assert (with_commit.head_branch, with_commit.head_sha, with_commit.adhoc) == (
        "main", SHA, False)


def test_the_api_takes_a_commit_and_refuses_a_branch_alone(api, make_token):
    token = {"HTTP_AUTHORIZATION": f"Bearer {make_token('pytorch/ao')}"}
    body = {"spec": SMALL_SPEC, "queue": "cpu", "timing": FAST_TIMING}
    alone = api.post("/api/v3/jobs", {**body, "head_branch": "main"}, format="json", **token)
    assert alone.status_code == 400
    assert "branch 'main' needs the commit" in alone.json()["head_sha"][0]
    assert not Job.objects.exists()
    short = api.post("/api/v3/jobs", {**body, "head_sha": "abc"}, format="json", **token)
    assert short.status_code == 400 and "full hex sha" in short.json()["head_sha"][0]
    made = api.post("/api/v3/jobs", {**body, "head_branch": "nightly", "head_sha": SHA},
                    format="json", **token)
    assert made.status_code == 202  # recorded; its tasks not handed to a broker (undelivered)
    shown = made.json()
    assert (shown["head_branch"], shown["head_sha"], shown["adhoc"], shown["status"]) == (
        "nightly", SHA, False, "pending")
    adhoc = api.post("/api/v3/jobs", body, format="json", **token).json()
    assert (adhoc["head_branch"], adhoc["adhoc"]) == ("adhoc", True)
    assert adhoc["head_sha"] == f"adhoc-job-{adhoc['id']}"


def test_bench_run_and_schedule_take_a_commit(tmp_path, capsys):
    spec = tmp_path / "small.yml"
    spec.write_text(SMALL_SPEC)
    call_command("bench", "run", str(spec), "--sha", SHA, "--branch", "release")
    job = Job.objects.get()
    assert (job.head_branch, job.head_sha, job.status) == ("release", SHA, "pending")
    assert f"pytorch/ao release {SHA[:12]}" in capsys.readouterr().out
    with pytest.raises(CommandError, match="--sha: branch 'main' needs the commit"):
        call_command("bench", "run", str(spec), "--branch", "main")
    with pytest.raises(CommandError, match="--repo: 'x' is not a repo: expected OWNER/NAME"):
        call_command("bench", "schedule", str(spec), "--repo", "x")
    call_command("bench", "schedule", str(spec), "--sha", SHA)
    assert json.loads(PeriodicTask.objects.get(task=TASK).kwargs) == {
        "queue": "cpu", "path": str(spec), "head_sha": SHA}


def test_job_pages_say_adhoc_and_answer_json(client):
    adhoc = submit_job(SMALL_SPEC, name="small.yml", queue="cpu", via="command")
    pinned = submit_job(SMALL_SPEC, name="small.yml", queue="cpu", via="command", head_sha=SHA)
    page = client.get(f"/jobs/{adhoc.pk}/").content.decode()
    assert "no commit (adhoc: what the workers had installed)" in page
    assert SHA in client.get(f"/jobs/{pinned.pk}/").content.decode()
    listed = client.get("/jobs/?format=json").json()
    rows = {row[0]: dict(zip(listed["tables"][0]["columns"], row, strict=True))
            for row in listed["tables"][0]["rows"]}
    assert (rows[adhoc.pk]["branch"], rows[adhoc.pk]["sha"]) == ("adhoc", adhoc.head_sha)
    assert (rows[pinned.pk]["branch"], rows[pinned.pk]["sha"]) == ("main", SHA)
    detail = client.get(f"/jobs/{adhoc.pk}/?format=json").json()
    tables = {table["name"]: table for table in detail["tables"]}
    job = dict(zip(tables["job"]["columns"], tables["job"]["rows"][0], strict=True))
    assert (job["status"], job["cells done"], job["cells"], job["adhoc"]) == (
        "pending", 0, 4, True)
    assert len(tables["cells"]["rows"]) == 4
