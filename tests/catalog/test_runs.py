"""Run now and schedules: configs become jobs through submit_job, in-process (eager Celery)."""

import json
from urllib.parse import quote_plus

import pytest
from celery import current_app
from django.test import Client
from django.utils.html import escape

from benchsite.catalog.models import BenchmarkConfig, Recipe
from benchsite.catalog.results import latest_commit
from benchsite.catalog.schedules import TASK
from benchsite.catalog.tasks import submit_scheduled
from benchsite.jobs.models import Job
from benchsite.results.models import Result
from tests.catalog.conftest import shown_messages, tiny_spec

# Cells are queued when the submitting transaction commits, so these tests commit.
pytestmark = [pytest.mark.torch, pytest.mark.django_db(transaction=True)]


def test_run_now_from_the_change_form_runs_the_config_and_links_its_results(
        maintainer_client, config):
    run = f"/admin/catalog/benchmarkconfig/{config.pk}/run/"
    form = maintainer_client.get(run)
    assert [choice for choice, _ in form.context["form"].fields["queue"].choices] == [
        "cpu", "cuda"]
    page = maintainer_client.post(run, {"queue": "cpu"}, follow=True)
    job = Job.objects.get()
    assert shown_messages(page) == [
        f'tiny_cpu: <a href="/jobs/{job.pk}/">job {job.pk}</a> queued, 2 cells on queue cpu, '
        'no commit (what the workers have installed; branch adhoc)']
    assert (job.config, job.name, job.queue, job.submitted_via, job.status) == (
        config, "tiny_cpu", "cpu", "admin", "succeeded")
    assert job.submitted_by.username == "maintainer" and job.timing == config.timing
    assert "torchao.quantization.Int8WeightOnlyConfig" in job.spec_yaml  # self-contained
    speedups = Result.objects.filter(series__metric="Fwd Speedup (x)", series__dtype="my_int8")
    assert speedups.count() == 2
    text = page.content.decode()
    assert f'href="/jobs/{job.pk}/">job {job.pk}</a>: succeeded, queue cpu' in text
    commit = latest_commit(config)
    # Run without a commit: not a point of main's history.
    assert (commit.repo, commit.branch, commit.sha) == ("pytorch/ao", "adhoc", job.head_sha)
    url = f"/quantization/?repo=pytorch%2Fao&branch=adhoc&sha={job.head_sha}&arch=" + (
        quote_plus(commit.arch))
    assert escape(url) in text
    cells = maintainer_client.get(url + "&format=json").json()
    assert {row[0] for row in cells["tables"][1]["rows"]} == {"my_int8"}


def test_the_run_action_asks_for_the_queue_and_refuses_disabled_recipes(
        maintainer_client, config):
    other = BenchmarkConfig.objects.create(name="int8dq_cpu", spec_yaml=tiny_spec("int8dq"),
                                           timing=config.timing)
    Recipe.objects.create(name="int8dq", kind=Recipe.Kind.BUILTIN, enabled=False)
    selected = {"action": "run_now", "_selected_action": [config.pk, other.pk]}
    ask = maintainer_client.post("/admin/catalog/benchmarkconfig/", selected)
    assert ask.status_code == 200 and ask.context["items"] == ["int8dq_cpu", "tiny_cpu"]
    done = maintainer_client.post("/admin/catalog/benchmarkconfig/",
                                  {**selected, "queue": "cpu"}, follow=True)
    messages = shown_messages(done)
    assert messages[0].startswith("int8dq_cpu: not run: int8dq_cpu: "
                                  "quantization_config_recipe_names[0]: recipe 'int8dq': it is "
                                  "disabled in the recipe catalog")
    assert "tiny_cpu: <a href" in messages[1]
    assert list(Job.objects.values_list("config__name", flat=True)) == ["tiny_cpu"]


def test_a_viewer_cannot_run_configs(client, roles, config):
    from tests.catalog.conftest import user_in

    client.force_login(user_in("viewers", "viewer"))
    assert client.post(f"/admin/catalog/benchmarkconfig/{config.pk}/run/",
                       {"queue": "cpu"}).status_code == 403
    assert not Job.objects.exists()


def test_a_nightly_schedule_submits_the_config_by_name(maintainer_client, config):
    schedule = f"/admin/catalog/benchmarkconfig/{config.pk}/schedule/"
    bad = maintainer_client.post(schedule, {"queue": "cpu", "cron": "nightly"})
    assert "five fields" in bad.context["form"].errors["cron"][0]
    page = maintainer_client.post(schedule, {"queue": "cpu", "cron": "0 3 * * *"}, follow=True)
    assert shown_messages(page)[0] == (
        "schedule 'config tiny_cpu on cpu' created: 0 3 * * * (m/h/dM/MY/d) UTC UTC, "
        "measuring no commit (adhoc) (celery beat submits the job)")
    from django_celery_beat.models import PeriodicTask

    entry = PeriodicTask.objects.get(task=TASK)
    assert "config tiny_cpu on cpu" in page.content.decode()  # listed on the config's page
    assert json.loads(entry.kwargs) == {"config": "tiny_cpu", "queue": "cpu",
                                        "repo": "pytorch/ao"}
    job_id = current_app.tasks[entry.task].apply(kwargs=json.loads(entry.kwargs)).get()
    job = Job.objects.get(pk=job_id)
    assert (job.config, job.submitted_via, job.status) == (config, "schedule", "succeeded")


def test_the_scheduled_task_names_a_missing_config():
    from benchsite.jobs.submit import JobRefused

    with pytest.raises(JobRefused, match="benchmark config 'gone': no such config"):
        submit_scheduled.apply(kwargs={"config": "gone", "queue": "cpu"}).get()


def test_bench_runs_and_schedules_a_config_by_name(config, capsys):
    from django.core.management import CommandError, call_command

    call_command("bench", "run", "--config", config.name, "--queue", "cpu", "--wait")
    job = Job.objects.get()
    assert (job.config, job.submitted_via, job.status) == (config, "command", "succeeded")
    from benchsite.jobs.api import JobSerializer

    shown = JobSerializer(job).data
    assert (shown["family"], shown["config"]) == ("quantization", config.name)
    assert shown["dashboard"].startswith("/quantization/?repo=pytorch%2Fao&branch=adhoc&sha=")
    page = Client().get(job.get_absolute_url()).content.decode()
    assert f'/admin/catalog/benchmarkconfig/{config.pk}/change/">{config.name}</a>' in page
    call_command("bench", "schedule", "--config", config.name, "--queue", "cpu")
    assert f"created schedule 'config {config.name} on cpu'" in capsys.readouterr().out
    from django_celery_beat.models import PeriodicTask

    entry = PeriodicTask.objects.get(task=TASK)
    assert json.loads(entry.kwargs) == {"queue": "cpu", "config": config.name}
    with pytest.raises(CommandError, match="no such benchmark config"):
        call_command("bench", "schedule", "--config", "nope")
    with pytest.raises(CommandError, match="'nope': no such config"):
        call_command("bench", "run", "--config", "nope")
    with pytest.raises(CommandError, match="its timing is set in the admin"):
        call_command("bench", "run", "--config", config.name, "--samples", "3")


def test_a_config_is_planned_once_when_it_runs(config, monkeypatch):
    from benchsite.catalog.run import run_config
    from benchsite.jobs import submit
    from runner import families

    plans = []
    real = families.plan
    monkeypatch.setattr(families, "plan", lambda *args: plans.append(args) or real(*args))
    monkeypatch.setattr(submit, "enqueue", lambda job: None)
    job = run_config(config, queue="cpu", via=Job.Via.COMMAND)
    assert len(plans) == 1 and job.cells.count() == job.cells_total == 2
