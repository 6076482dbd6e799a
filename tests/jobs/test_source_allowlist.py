"""The packages of the sources registered for bisection are allowed code modules while the
source exists (issue 18: "the runner's own models and the sources registered for
bisection"); the admin's own rows are untouched by sources coming and going."""

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.urls import reverse

from benchsite.access.models import AllowedCodeModule
from benchsite.bisects.models import Source
from benchsite.jobs import submit
from benchsite.jobs.models import Job
from benchsite.jobs.submit import JobRefused, submit_job

SPEC = """\
family: compilers
models: ["demo_pkg.model:make"]
backends: [eager]
tests: [eval]
device: cpu
"""
JOBS = "/api/v3/jobs"


@pytest.fixture(autouse=True)
def nothing_runs(monkeypatch):
    """Only the decision is under test: accepted jobs' cells are not queued."""
    monkeypatch.setattr(submit, "enqueue", lambda job: None)


def post_job(api, secret):
    return api.post(JOBS, {"spec": SPEC, "queue": "cpu"}, format="json",
                    HTTP_AUTHORIZATION=f"Bearer {secret}")


def make_source(**fields) -> Source:
    source = Source(**{"name": "demo", "location": "/srv/demo", "repo": "demo/pkg",
                       "modules": "demo_pkg", **fields})
    source.full_clean()
    source.save()
    return source


def submits(spec=SPEC) -> bool:
    try:
        submit_job(spec, name="cli.yml", queue="cpu", via=Job.Via.COMMAND)
    except JobRefused as refused:
        assert "demo_pkg.model:make" in str(refused)
        return False
    return True


def test_a_sources_packages_are_allowed_while_it_exists(api, make_token):
    secret = make_token("pytorch/ao", scopes=["submit_jobs"], queues=["cpu"])
    refused = post_job(api, secret)
    assert refused.status_code == 400
    assert "demo_pkg.model:make" in refused.json()["spec"][0]

    source = make_source()
    assert post_job(api, secret).status_code in (201, 202)
    assert submits()

    source.delete()
    refused = post_job(api, secret)
    assert refused.status_code == 400 and "demo_pkg.model:make" in refused.json()["spec"][0]
    assert Job.objects.count() == 2


def test_renaming_or_editing_a_source_changes_exactly_its_own_entries(db):
    source = make_source(modules="other_pkg, demo_pkg")
    assert AllowedCodeModule.provided() == {"demo_pkg": ["source 'demo'"],
                                            "other_pkg": ["source 'demo'"]}
    source.name = "demo-2"
    source.save()
    assert AllowedCodeModule.provided()["demo_pkg"] == ["source 'demo-2'"]
    assert submits()
    source.modules = "other_pkg"
    source.save()
    assert not submits()
    # a module two sources provide stays allowed while either does
    make_source(name="fork", modules="demo_pkg")
    make_source(name="third", modules="demo_pkg.model")
    assert AllowedCodeModule.provided()["demo_pkg"] == ["source 'fork'"]
    Source.objects.filter(name="fork").delete()
    assert submits()  # demo_pkg.model from 'third'
    Source.objects.all().delete()
    assert not submits() and AllowedCodeModule.provided() == {}


def test_an_admin_made_row_survives_the_source(db):
    AllowedCodeModule.objects.create(module="demo_pkg", note="trusted by hand")
    source = make_source()
    assert submits()
    source.delete()
    assert AllowedCodeModule.objects.get().note == "trusted by hand"
    assert submits()


@pytest.mark.parametrize("modules, problem", [
    ("os", "standard library"),
    ("demo_pkg, json.tool", "standard library"),
    ("demo-pkg", "not a module name"),
    ("demo_pkg;rm -rf", "not a module name"),
])
def test_a_source_declares_only_its_own_packages(db, modules, problem):
    with pytest.raises(ValidationError, match=problem):
        make_source(modules=modules)
    assert not Source.objects.exists()


def test_the_admin_shows_and_validates_a_sources_modules(db, client):
    client.force_login(User.objects.create_superuser("root"))
    data = {"name": "demo", "location": "/srv/demo", "repo": "demo/pkg", "web_url": "",
            "mode": "pythonpath", "build_command": "", "pythonpath": ".", "env": "{}",
            "build_timeout_s": 1800}
    refused = client.post(reverse("admin:bisects_source_add"), {**data, "modules": "os"})
    assert refused.status_code == 200 and "standard library" in refused.content.decode()
    added = client.post(reverse("admin:bisects_source_add"), {**data, "modules": "demo_pkg"})
    assert added.status_code == 302, added.content.decode()
    assert Source.objects.get().module_names() == ("demo_pkg",)

    sources = client.get(reverse("admin:bisects_source_changelist")).content.decode()
    assert "demo_pkg" in sources
    allowed = client.get(reverse("admin:access_allowedcodemodule_changelist")).content.decode()
    assert "demo_pkg (source &#x27;demo&#x27;)" in allowed and "always allowed: runner" in allowed
