"""A new benchmark family and its page, declared in this module only: its spec, its cell (a
runner family module: NAME, plan, check_settings, run) and its page (a FamilyPage without a
builder of its own, so the generic family page shows it). Registered for one test after the
URLconf has loaded, the family shows on its page, in the nav and on its job's page; no other
file knows it."""

from __future__ import annotations

import types

import orjson
import pytest
from django.urls import reverse

from benchsite.jobs import submit
from benchsite.results.ingest import store_upload
from dashboards import families
from dashboards.families import FamilyPage
from runner import families as runner_families
from runner.contract.status import OK
from runner.engine.cells import Outcome, Planned

NAME, BENCHMARK, METRIC = "toy", "toy benchmark", "toy_time_ms"
SPEC = "family: toy\nsizes: [8, 16]\n"
ARCH = "Toy CPU 9000"
SHA = "ab" * 20


# The toy family's cell: the runner's family interface (runner/families.py).
def plan(data, source):
    return [Planned(f"size={size}", {"size": size}) for size in data["sizes"]]


def check_settings(settings):
    if settings:
        raise ValueError(f"the toy family takes no settings, not {sorted(settings)}")


def run(cell, settings, state, context, files):
    size = cell["size"]
    return Outcome(OK, records=[{
        "benchmark": {"name": BENCHMARK, "extra_info": {"device": "cpu", "arch": ARCH}},
        "model": {"name": f"toy-{size}"},
        "metric": {"name": METRIC, "benchmark_values": [size / 8],
                   "extra_info": {"unit": "ms"}}}])


def toy_module() -> types.ModuleType:
    module = types.ModuleType("tests.dashboards.toy_family")
    module.NAME, module.plan, module.check_settings, module.run = (
        NAME, plan, check_settings, run)
    return module


# The toy family's page: one declaration.
PAGE = FamilyPage(family=NAME, benchmark=BENCHMARK, slug="toy", label="Toy kernels",
                  headline=METRIC, columns={METRIC: "time ms"}, by_commit=True)


@pytest.fixture
def toy():
    reverse("dashboards:home")  # the URLconf is loaded before the family is registered
    module = runner_families.register(toy_module())
    families.register(PAGE)
    yield module
    families.unregister(NAME)
    runner_families.unregister(NAME)


def run_job(module):
    """Submit the toy spec as a job and run its cells as a worker would, storing their
    records under the job's run."""
    job = submit.submit_job(SPEC, name="toy.yml", queue="cpu", via="api",
                            repo="pytorch/toy", head_sha=SHA)
    for cell in job.cells.order_by("index"):
        outcome = module.run(cell.cell, job.timing, {}, None, cell.files)
        store_upload(orjson.dumps(outcome.records), metadata=job.run_metadata(),
                     announce=False)
    return job


@pytest.mark.django_db
def test_a_family_declared_in_a_test_shows_everywhere(client, toy, monkeypatch):
    monkeypatch.setattr(submit, "enqueue", lambda job: None)  # run below, in this process
    job = run_job(toy)
    assert job.family == NAME and job.cells_total == 2

    # Its job links to its page at the job's commit; the link opens it there.
    link = f"/toy/?repo=pytorch%2Ftoy&branch=main&sha={SHA}"
    assert job.dashboard_url() == link
    html = client.get(job.get_absolute_url()).content.decode()
    assert f'href="{link.replace("&", "&amp;")}"' in html
    assert "results on the toy dashboard" in html

    page = client.get(link + "&format=json").json()
    assert page["title"] == "Toy kernels"
    assert page["filters"]["sha"] == SHA and page["filters"]["arch"] == ARCH
    [table] = page["tables"]
    assert table["columns"] == ["model", "time ms", "status"]
    assert table["rows"] == [["toy-16", 2.0, "ok"], ["toy-8", 1.0, "ok"]]

    # Its page, by its route and the registry's generic name, and in the nav of every page.
    assert reverse("dashboards:family", kwargs={"where": "toy"}) == "/toy/" == PAGE.url()
    html = client.get("/toy/").content.decode()
    assert "<h1>Toy kernels</h1>" in html and "toy-16" in html
    assert '<a href="/toy/">Toy kernels</a>' in client.get("/").content.decode()


@pytest.mark.django_db
def test_without_its_registration_the_family_has_no_page(client):
    assert families.page_of(NAME) is None
    assert client.get("/toy/").status_code == 404
    assert '<a href="/toy/">' not in client.get("/").content.decode()
    assert client.get("/quantization/").status_code == 200
