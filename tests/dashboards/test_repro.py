"""The repro commands of a regression, an alert group's members, a job's cells and a run's
(dashboards.repro): runnable as shown, selecting exactly the cell measured."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from benchsite.bisects.models import Source
from benchsite.catalog.management.commands.bench import Command as Bench
from benchsite.jobs.models import ADHOC_BRANCH, Job, JobCell, adhoc_sha
from benchsite.regressions.models import AlertGroup
from benchsite.results.models import Run, Series
from runner import families
from runner.engine.selection import select
from runner.engine.specs import parse_yaml, read_spec
from runner.sources import demo
from tests.bisects.test_start import job_measured_regression
from tests.regressions.factory import make_group, make_regression, record, sha, upload

pytestmark = pytest.mark.django_db
KEY = "custom/demo_mlp/eager/eval/float32/cpu/bsdefault"  # the demo spec's one cell
SPEC_FILE = Path(settings.BASE_DIR) / "fixtures" / "specs" / "cpu_small.yml"


def repro_rows(client, url: str) -> list[dict]:
    tables = client.get(url, {"format": "json"}).json()["tables"]
    table = next(table for table in tables if table["name"] == "repro")
    return [dict(zip(table["columns"], row, strict=True)) for row in table["rows"]]


def runner_words(line: str) -> list[str]:
    """The `python -m runner run` command of a line, after any `env NAME=VALUE` before it."""
    words = shlex.split(line)
    assert shlex.join(words) == line  # quoted as shlex quotes: runnable as shown
    start = words.index("python")
    assert words[start:start + 4] == ["python", "-m", "runner", "run"]
    return words[start + 4:]


def selected(spec_text: str, words: list[str]) -> list[str]:
    """The keys the runner's own selection picks with the command's --cells."""
    _, planned = families.plan(parse_yaml(spec_text, "spec"), "spec")
    return [cell.key for cell in select(planned, words[words.index("--cells") + 1], "spec")]


@pytest.fixture
def measured(db):
    """A regression of demo/pkg whose first bad run a job of the demo spec measured."""
    return job_measured_regression()


def test_a_regressions_repro_runs_its_cell_at_both_ends_and_the_pair(client, measured):
    Source.objects.create(name="demo", location="/srv/src/demo", repo="demo/pkg",
                          mode="pythonpath", pythonpath=".,src", env={"USE_CPP": "0"})
    url = measured.get_absolute_url()
    [row] = repro_rows(client, url)
    assert row["for"] == f"regression {measured.pk}"
    lines = row["command"].splitlines()
    fetch, clone, good, run_good, bad, run_bad, ab = lines
    saved = f"job-{JobCell.objects.get(key=KEY).job_id}.yml"
    # The spec, saved from the jobs API, is the job's as submitted.
    assert fetch.endswith(f"> {saved}")
    api_url = shlex.split(fetch)[2]
    assert client.get(api_url).json()["spec_yaml"] == demo.SPEC
    assert shlex.split(clone) == ["git", "clone", "/srv/src/demo", "pkg"]
    assert shlex.split(good) == ["git", "-C", "pkg", "checkout", sha(2)]
    assert shlex.split(bad) == ["git", "-C", "pkg", "checkout", sha(3)]
    for line, output in ((run_good, "good.json"), (run_bad, "bad.json")):
        assert shlex.split(line)[:3] == ["env", "USE_CPP=0", "PYTHONPATH=pkg:pkg/src"]
        words = runner_words(line)
        assert words[0] == saved
        assert words[-2:] == ["-o", output]
        assert selected(demo.SPEC, words) == [KEY]
    # The pair: bench ab as its own parser reads it.
    words = shlex.split(ab)
    assert words[:4] == ["python", "manage.py", "bench", "ab"]
    options = Bench().create_parser("manage.py", "bench").parse_args(words[3:])
    assert (options.source, options.base, options.head, options.queue) == (
        "demo", sha(2), sha(3), "cpu")
    assert selected(demo.SPEC, ["--cells", options.cells]) == [KEY]
    page = client.get(url).content.decode()
    assert 'id="repro"' in page and "<pre><code>" in page
    assert "python -m runner run job-" in page


def test_a_series_ci_uploaded_says_no_spec_is_stored(client):
    for night in range(4):
        upload(night, [record("m", [1.0] * 3)])
    regression = make_regression(Series.objects.get(model="m"), 2)
    [row] = repro_rows(client, regression.get_absolute_url())
    assert row["command"] is None
    assert row["notes"].startswith("No spec is stored")
    assert f"commits {sha(1)}..{sha(2)}" in row["notes"] and "pytorch/ao" in row["notes"]
    page = client.get(regression.get_absolute_url()).content.decode()
    assert "No spec is stored" in page and "python -m runner" not in page


def test_an_alert_group_shows_each_members_repro(client, measured):
    for night in range(6):
        upload(night, [record("other", [1.0] * 3)], repo="demo/pkg", job=1,
               head_sha=sha(night))
    other = make_regression(Series.objects.get(repo="demo/pkg", model="other"), 3)
    group = make_group(measured, other)
    rows = {row["for"]: row for row in repro_rows(client, group.get_absolute_url())}
    assert set(rows) == {f"regression {measured.pk}", f"regression {other.pk}"}
    assert "--cells" in rows[f"regression {measured.pk}"]["command"]
    assert rows[f"regression {other.pk}"]["command"] is None
    assert 'id="repro"' in client.get(group.get_absolute_url()).content.decode()


def test_an_alert_groups_queries_do_not_grow_with_its_members(client, measured):
    """The members' repros are read together: a group of 144 regressions made 146 queries."""
    for night in range(6):
        upload(night, [record(f"m{n}", [1.0] * 3) for n in range(6)], repo="demo/pkg",
               job=1, head_sha=sha(night))
    others = [make_regression(Series.objects.get(repo="demo/pkg", model=f"m{n}"), 3)
              for n in range(6)]

    def queries(group) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(group.get_absolute_url(), {"format": "json"}).status_code == 200
        return len(captured)

    small = queries(make_group(measured, others[0]))
    rows = {row["for"]: row for row in repro_rows(
        client, make_group(measured, *others).get_absolute_url())}
    assert queries(AlertGroup.objects.get(pk=measured.group_id)) == small
    assert len(rows) == 7 and "--cells" in rows[f"regression {measured.pk}"]["command"]
    assert all(rows[f"regression {other.pk}"]["command"] is None for other in others)


def test_a_jobs_cells_run_from_the_shipped_spec_at_the_jobs_commit(client):
    text = SPEC_FILE.read_text()
    _, planned = families.plan(read_spec(SPEC_FILE), str(SPEC_FILE))
    job = Job.objects.create(name="cpu_small.yml", spec_yaml=text, queue="cpu",
                             submitted_via="command", repo="pytorch/ao", head_branch="main",
                             head_sha="a" * 40)
    for index, cell in enumerate(planned[:3]):
        JobCell.objects.create(job=job, index=index, key=cell.key, cell=cell.cell)
    rows = repro_rows(client, job.get_absolute_url())
    assert [row["for"] for row in rows] == [f"cell {cell.key}" for cell in planned[:3]]
    for row, cell in zip(rows, planned, strict=False):
        clone, checkout, run = row["command"].splitlines()
        assert shlex.split(clone) == ["git", "clone", "https://github.com/pytorch/ao", "ao"]
        assert shlex.split(checkout) == ["git", "-C", "ao", "checkout", "a" * 40]
        words = runner_words(run)
        assert words[0] == "fixtures/specs/cpu_small.yml"  # the site's file: unchanged
        assert selected(text, words) == [cell.key]
        assert "pip install -e ao" in row["notes"]
    assert "fixtures/specs/cpu_small.yml --cells" in client.get(
        job.get_absolute_url()).content.decode()


def test_an_adhoc_jobs_cell_runs_without_a_checkout(client):
    job = Job.objects.create(name="cpu_small.yml", spec_yaml=SPEC_FILE.read_text() + "\n",
                             queue="cpu", submitted_via="api", repo="pytorch/ao",
                             head_branch=ADHOC_BRANCH, head_sha="")
    job.head_sha = adhoc_sha(job.pk)
    job.save()
    key = "cpu_small/linear/int8wo/256-512-512/bfloat16/cpu/eager"
    JobCell.objects.create(job=job, index=0, key=key, cell={})
    [row] = repro_rows(client, job.get_absolute_url())
    fetch, run = row["command"].splitlines()  # an edited spec: saved from the API
    assert runner_words(run)[0] == f"job-{job.pk}.yml" and "git" not in row["command"]
    assert "without a commit" in row["notes"]


def test_a_run_a_job_measured_shows_its_cells_repro(client, measured):
    cell = JobCell.objects.select_related("job").get(key=KEY)
    run = Run.objects.get(upload=cell.upload)
    url = reverse("dashboards:run", args=[run.pk])
    [row] = repro_rows(client, url)
    assert row["for"] == f"cell {KEY}"
    fetch, clone, checkout, run_line = row["command"].splitlines()
    assert fetch.endswith(f"> job-{cell.job_id}.yml")
    assert shlex.split(clone) == ["git", "clone", "https://github.com/demo/pkg", "pkg"]
    assert shlex.split(checkout) == ["git", "-C", "pkg", "checkout", cell.job.head_sha]
    words = runner_words(run_line)
    assert words[0] == f"job-{cell.job_id}.yml" and selected(demo.SPEC, words) == [KEY]
    page = client.get(url).content.decode()
    assert 'id="repro"' in page and "python -m runner run job-" in page
    assert 'data-table="repro"' not in page  # shown as commands, not as a table
    assert client.get(url, {"format": "csv", "table": "repro"})["Content-Type"] == "text/csv"


def test_a_run_uploaded_without_a_job_says_no_spec_is_stored(client):
    stored = upload(0, [record("m", [1.0] * 3)])
    run = stored.upload.runs.get()
    url = reverse("dashboards:run", args=[run.pk])
    [row] = repro_rows(client, url)
    assert row["for"] == f"run {run.pk}" and row["command"] is None
    assert row["notes"].startswith("No spec is stored")
    assert f"repo pytorch/ao, branch main, commit {sha(0)}" in row["notes"]
    page = client.get(url).content.decode()
    assert "No spec is stored" in page and "python -m runner" not in page
