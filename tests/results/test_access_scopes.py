"""Tokens do only what their scopes say: uploads, job submissions on their queues, code from
allowed modules only, replays after the repo check, keys per token, raw payloads by
permission and repo scope."""

import json

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.urls import reverse

from benchsite.access.models import AllowedCodeModule, RepoScope
from benchsite.jobs import submit
from benchsite.jobs.models import Job
from benchsite.jobs.submit import JobRefused, submit_job
from benchsite.results.models import Upload, UploadToken
from tests.results.samples import META, record

ACCEPTED = (201, 202)  # stored, or stored with its queueing to come (broker down)
RESULTS = "/api/v3/results"
JOBS = "/api/v3/jobs"
SPEC = """\
family: compilers
models: [mlp]
backends: [eager]
tests: [eval]
device: cpu
"""


def bearer(secret):
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


def upload(api, secret, body, **headers):
    headers = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
    return api.generic("POST", RESULTS, json.dumps(body).encode(),
                       content_type="application/json", **bearer(secret), **headers)


def post_job(api, secret, spec=SPEC, queue="cpu"):
    return api.post(JOBS, {"spec": spec, "queue": queue}, format="json", **bearer(secret))


@pytest.fixture(autouse=True)
def nothing_runs(monkeypatch):
    """Submitted cells are never queued: these tests are about who may submit."""
    monkeypatch.setattr(submit, "enqueue", lambda job: None)


def test_new_tokens_may_only_upload():
    assert UploadToken(name="ci", repos=["pytorch/ao"]).scopes == ["upload"]


def test_a_token_uploads_only_with_the_upload_scope(api, make_token):
    reader = make_token("pytorch/ao", scopes=["read"])
    refused = upload(api, reader, [record(**META)])
    assert refused.status_code == 403 and "'upload' scope" in refused.json()["detail"]
    assert Upload.objects.count() == 0
    assert upload(api, make_token("pytorch/ao", scopes=["upload"]),
                  [record(**META)]).status_code == 201


def test_an_upload_token_cannot_submit_jobs(api, make_token):
    response = post_job(api, make_token("pytorch/ao", scopes=["upload"]))
    assert response.status_code == 403 and "submit_jobs" in response.json()["detail"]
    assert Job.objects.count() == 0


def test_a_submit_token_submits_only_to_its_queues(api, make_token):
    secret = make_token("pytorch/ao", scopes=["submit_jobs"], queues=["cpu"])
    refused = post_job(api, secret, queue="cuda")
    assert refused.status_code == 403 and "queue 'cuda'" in refused.json()["detail"]
    accepted = post_job(api, secret, queue="cpu")
    assert accepted.status_code in ACCEPTED, accepted.json()
    job = Job.objects.get()
    assert job.queue == "cpu" and job.submitted_token.name == "ci"
    # nor may it upload results
    assert upload(api, secret, [record(**META)]).status_code == 403


def test_a_token_cancels_only_jobs_on_its_queues(api, make_token):
    cpu = make_token("pytorch/ao", scopes=["submit_jobs"], queues=["cpu"])
    job_id = post_job(api, cpu).json()["id"]
    cuda_only = make_token("pytorch/ao", scopes=["submit_jobs"], queues=["cuda"])
    refused = api.post(f"{JOBS}/{job_id}/cancel", **bearer(cuda_only))
    assert refused.status_code == 403 and "queue 'cpu'" in refused.json()["detail"]
    uploader = make_token("pytorch/ao", scopes=["upload"])
    assert api.post(f"{JOBS}/{job_id}/cancel", **bearer(uploader)).status_code == 403
    assert api.post(f"{JOBS}/{job_id}/cancel", **bearer(cpu)).status_code == 200


CUSTOM = """\
family: compilers
models: [{factory: "os:system"}, "tests.runner.experiment_models:tiny"]
backends: [eager, "evil.backends:run"]
tests: [eval]
device: cpu
"""


def test_specs_name_code_only_from_allowed_modules(api, make_token):
    secret = make_token("pytorch/ao", scopes=["submit_jobs"], queues=["cpu"])
    refused = post_job(api, secret, spec=CUSTOM)
    assert refused.status_code == 400
    message = refused.json()["spec"][0]
    assert "os:system" in message and "evil.backends:run" in message
    assert "tests.runner.experiment_models:tiny" in message
    assert Job.objects.count() == 0

    AllowedCodeModule.objects.create(module="tests.runner")
    AllowedCodeModule.objects.create(module="evil")  # a package allows its submodules
    message = post_job(api, secret, spec=CUSTOM).json()["spec"][0]
    assert "os:system" in message and "evil" not in message and "tests.runner" not in message

    # a name that only starts like an allowed module is not inside it
    near = CUSTOM.replace('{factory: "os:system"}, ', "").replace("tests.runner.",
                                                                   "tests.runnerx.")
    refused = post_job(api, secret, spec=near).json()["spec"][0]
    assert "tests.runnerx.experiment_models:tiny" in refused
    allowed = CUSTOM.replace('{factory: "os:system"}, ', "")
    assert post_job(api, secret, spec=allowed).status_code in ACCEPTED


def test_every_submission_path_checks_the_modules(db):
    spec = CUSTOM.replace('{factory: "os:system"}, ', "")
    with pytest.raises(JobRefused, match="evil.backends:run"):
        submit_job(spec, name="cli.yml", queue="cpu", via=Job.Via.COMMAND)
    # the runner's own code (built-in models) needs no entry
    assert submit_job(SPEC, name="cli.yml", queue="cpu", via=Job.Via.COMMAND).cells_total == 1


def test_a_replay_is_answered_only_after_the_repo_check(api, make_token):
    body = [record(**META)]
    first = upload(api, make_token("pytorch/ao", scopes=["upload"]), body,
                   **{"Idempotency-Key": "nightly-1"})
    assert first.status_code == 201
    other = make_token("other/repo", scopes=["upload"], name="other")
    for headers in ({"Idempotency-Key": "nightly-1"}, {}):
        response = upload(api, other, body, **headers)
        assert response.status_code == 403, response.json()
        assert "may upload only for ['other/repo']" in response.json()["errors"][0]


def test_idempotency_keys_belong_to_their_token(api, make_token):
    one = make_token("pytorch/ao", scopes=["upload"], name="one")
    two = make_token("pytorch/ao", scopes=["upload"], name="two")
    key = {"Idempotency-Key": "build-42"}
    assert upload(api, one, [record(**META)], **key).status_code == 201
    other_content = [record(**{**META, "job_id": 3003})]
    assert upload(api, two, other_content, **key).status_code == 201
    assert Upload.objects.filter(idempotency_key="build-42").count() == 2
    # the same token reusing its key for other content is still refused
    reused = upload(api, one, [record(**{**META, "job_id": 4004})], **key)
    assert reused.status_code == 409
    # and repeating its own upload is a replay
    again = upload(api, two, other_content, **key)
    assert again.status_code == 200 and again.json()["created"] is False


def test_tokens_that_shared_a_key_can_both_be_deleted(api, make_token):
    key = {"Idempotency-Key": "build-7"}
    for name, job in (("one", 1), ("two", 2)):
        secret = make_token("pytorch/ao", scopes=["upload"], name=name)
        assert upload(api, secret, [record(**{**META, "job_id": job})], **key).status_code == 201
    UploadToken.objects.all().delete()
    assert list(Upload.objects.values_list("token", "idempotency_key")) == [
        (None, "build-7"), (None, "build-7")]
    # a new token may use the key again
    secret = make_token("pytorch/ao", scopes=["upload"], name="three")
    assert upload(api, secret, [record(**{**META, "job_id": 3})], **key).status_code == 201


def test_the_token_admin_edits_scopes_and_queues_as_fields(db, client):
    client.force_login(User.objects.create_superuser("admin", password="pw"))
    url = reverse("admin:results_uploadtoken_add")
    form = client.get(url).content.decode()
    assert 'type="checkbox" name="scopes" value="submit_jobs"' in form
    assert 'type="checkbox" name="queues" value="cuda"' in form
    data = {"name": "gpu ci", "repos": "pytorch/ao\nmeta/*", "scopes": ["upload", "submit_jobs"],
            "is_active": "on"}
    missing = client.post(url, data)
    assert missing.status_code == 200 and "needs at least one queue" in missing.content.decode()
    bad_repo = client.post(url, {**data, "repos": "pytorch", "queues": ["cpu"]})
    assert "expected OWNER/NAME" in bad_repo.content.decode()
    assert client.post(url, {**data, "queues": ["cpu"]}).status_code == 302
    token = UploadToken.objects.get()
    assert (token.repos, token.scopes, token.queues) == (
        ["pytorch/ao", "meta/*"], ["upload", "submit_jobs"], ["cpu"])


def test_an_uploader_cannot_mint_a_token_that_submits_jobs(db, client):
    uploader = staff("results.add_uploadtoken", "results.view_uploadtoken")
    RepoScope.objects.create(user=uploader, upload_repos=["pytorch/*"])
    client.force_login(uploader)
    url = reverse("admin:results_uploadtoken_add")
    data = {"name": "sneaky", "repos": "pytorch/ao", "scopes": ["upload", "submit_jobs"],
            "queues": ["cuda"], "is_active": "on"}
    refused = client.post(url, data)
    assert refused.status_code == 200
    assert "only users who may submit jobs (jobs.add_job)" in refused.content.decode()
    assert not UploadToken.objects.exists()
    assert client.post(url, {**data, "scopes": ["upload"], "queues": []}).status_code == 302
    assert UploadToken.objects.get().scopes == ["upload"]


def test_create_upload_token_takes_scopes_and_queues(db, capsys):
    call_command("create_upload_token", "--repo", "pytorch/ao")
    call_command("create_upload_token", "--repo", "pytorch/ao", "--name", "gpu", "--scope",
                 "submit_jobs", "--scope", "read", "--queue", "cuda")
    plain, gpu = UploadToken.objects.order_by("pk")
    assert (plain.scopes, plain.queues) == (["upload"], [])
    assert (gpu.scopes, gpu.queues) == (["submit_jobs", "read"], ["cuda"])
    secret = capsys.readouterr().out.split()[-1]
    assert UploadToken.objects.get(digest=UploadToken.hash(secret)) == gpu
    with pytest.raises(CommandError, match="needs at least one --queue"):
        call_command("create_upload_token", "--repo", "pytorch/ao", "--scope", "submit_jobs")
    with pytest.raises(CommandError, match="--queue 'tpu': unknown"):
        call_command("create_upload_token", "--repo", "pytorch/ao", "--scope", "submit_jobs",
                     "--queue", "tpu")
    with pytest.raises(CommandError, match="--queue is for tokens with --scope submit_jobs"):
        call_command("create_upload_token", "--repo", "pytorch/ao", "--queue", "cpu")
    with pytest.raises(CommandError, match="invalid choice: 'admin'"):
        call_command("create_upload_token", "--repo", "pytorch/ao", "--scope", "admin")


def staff(*perms: str) -> User:
    user = User.objects.create_user("staff", password="pw", is_staff=True)
    for perm in perms:
        app, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app,
                                                         codename=codename))
    return user


def test_raw_payloads_need_the_permission_and_the_repo_scope(api, client, make_token):
    secret = make_token("pytorch/ao", "vllm-project/*", scopes=["upload"])
    ao = Upload.objects.get(pk=upload(api, secret, [record(**META)]).json()["upload_id"])
    vllm = Upload.objects.get(pk=upload(
        api, secret, [record(**{**META, "repo": "vllm-project/vllm"})]).json()["upload_id"])

    def download(upload):
        return client.get(reverse("admin:results_upload_payload", args=[upload.pk]))

    user = staff("results.view_upload")
    client.force_login(user)
    assert download(ao).status_code == 403
    page = client.get(reverse("admin:results_upload_change", args=[ao.pk])).content.decode()
    assert "download (gzip)" not in page and "download_payload permission" in page

    user.user_permissions.add(Permission.objects.get(codename="download_payload"))
    user = User.objects.get(pk=user.pk)  # permissions are cached per user object
    client.force_login(user)
    assert download(ao).status_code == 403  # no repo scope: no repos
    RepoScope.objects.create(user=user, repos=["pytorch/*"])
    response = download(ao)
    assert response.status_code == 200 and response["Content-Type"] == "application/gzip"
    assert download(vllm).status_code == 403
    page = client.get(reverse("admin:results_upload_change", args=[ao.pk])).content.decode()
    assert "download (gzip)" in page

    client.force_login(User.objects.create_superuser("root", password="pw"))
    assert download(vllm).status_code == 200
