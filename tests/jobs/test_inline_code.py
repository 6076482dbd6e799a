"""A spec that carries Python of its own (instruction-count definitions) is code a worker runs
as written: from the API it needs the token's `run_code` scope (or a superuser), never just
`submit_jobs`. Built-in definitions run only the runner's own code."""

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from benchsite.jobs import submit
from benchsite.jobs.models import Job
from benchsite.results.models import UploadToken

BUILTIN_ONLY = """\
family: instructions
builtin: ["add", "matmul"]
threads: [2]
"""
OWN_CODE = """\
family: instructions
builtin: ["add"]
definitions:
  - {name: neg, setup: "import os", stmt: "y = os.getpid()"}
"""


def post_job(api, secret, spec):
    return api.post("/api/v3/jobs", {"spec": spec, "queue": "cpu", "repo": "pytorch/ao"},
                    format="json", HTTP_AUTHORIZATION=f"Bearer {secret}")


@pytest.fixture(autouse=True)
def _nothing_runs(monkeypatch):
    """Only the decision is under test: the accepted jobs' cells are not run."""
    monkeypatch.setattr(submit, "enqueue", lambda job: None)


def test_a_submit_token_cannot_send_code_of_its_own(api, make_token):
    secret = make_token("pytorch/ao", scopes=["submit_jobs"], queues=["cpu"])
    refused = post_job(api, secret, OWN_CODE)
    assert refused.status_code == 400
    message = refused.json()["spec"][0]
    assert "definition 'neg'" in message and "'run_code' scope" in message
    assert Job.objects.count() == 0
    # the built-in definitions, even re-threaded, are the runner's own code
    assert post_job(api, secret, BUILTIN_ONLY).status_code in (201, 202)


def test_the_run_code_scope_allows_it(api, make_token):
    secret = make_token("pytorch/ao", scopes=["submit_jobs", "run_code"], queues=["cpu"])
    accepted = post_job(api, secret, OWN_CODE)
    assert accepted.status_code in (201, 202), accepted.content
    assert Job.objects.get().cells_total == 8  # add and neg, each in 2 runtimes x 2 modes


def test_users_need_to_be_superusers_and_operators_may(db):
    staff = User.objects.create_user("maintainer", is_staff=True)
    with pytest.raises(submit.JobRefused, match="definition 'neg'"):
        submit.submit_job(OWN_CODE, name="api.yml", queue="cpu", via=Job.Via.API, user=staff)
    root = User.objects.create_superuser("root")
    assert submit.submit_job(OWN_CODE, name="api.yml", queue="cpu", via=Job.Via.API, user=root)
    # the server's command line and the admin's configs are the operators' own text
    for via in (Job.Via.COMMAND, Job.Via.ADMIN):
        assert submit.submit_job(OWN_CODE, name="cli.yml", queue="cpu", via=via)



def test_only_a_superuser_grants_run_code_in_the_admin(db, client):
    url = reverse("admin:results_uploadtoken_add")
    data = {"name": "ci", "repos": "pytorch/ao", "scopes": ["submit_jobs", "run_code"],
            "queues": ["cpu"], "is_active": "on"}
    maintainer = User.objects.create_user("maintainer", is_staff=True)
    maintainer.user_permissions.set(Permission.objects.filter(
        codename__in=["add_uploadtoken", "view_uploadtoken", "add_job"]))
    client.force_login(maintainer)
    refused = client.post(url, data)
    assert "only superusers may give a token the run_code scope" in refused.content.decode()
    assert not UploadToken.objects.exists()

    client.force_login(User.objects.create_superuser("root"))
    alone = client.post(url, {**data, "scopes": ["upload", "run_code"]})
    assert "run_code only widens submit_jobs" in alone.content.decode()
    assert client.post(url, data).status_code == 302
    assert UploadToken.objects.get().scopes == ["submit_jobs", "run_code"]
