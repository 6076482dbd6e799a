"""Run now and schedules in the admin take the commit a job measures (tests/jobs/
test_job_commits.py has the rules); the config is checked against the recipe catalog."""

import json

import pytest
from django_celery_beat.models import PeriodicTask

from benchsite.catalog.schedules import TASK
from benchsite.jobs import submit
from benchsite.jobs.models import Job
from tests.catalog.conftest import shown_messages

pytestmark = [pytest.mark.torch, pytest.mark.django_db(transaction=True)]
SHA = "0123456789abcdef0123456789abcdef01234567"


def test_run_now_and_schedule_forms_take_a_commit(maintainer_client, config, monkeypatch):
    monkeypatch.setattr(submit, "enqueue", lambda job: None)  # recorded, not run
    run = f"/admin/catalog/benchmarkconfig/{config.pk}/run/"
    form = maintainer_client.get(run).context["form"]
    assert form.fields["repo"].initial == "pytorch/ao"
    assert "'adhoc' branch" in form.fields["head_sha"].help_text
    refused = maintainer_client.post(run, {"queue": "cpu", "repo": "pytorch/ao",
                                           "head_branch": "main"})
    assert "needs the commit" in refused.context["form"].errors["head_sha"][0]
    assert not Job.objects.exists()
    page = maintainer_client.post(run, {"queue": "cpu", "repo": "pytorch/ao",
                                        "head_sha": SHA}, follow=True)
    job = Job.objects.get()
    assert (job.head_branch, job.head_sha, job.submitted_via) == ("main", SHA, "admin")
    assert shown_messages(page)[0].endswith(f"pytorch/ao main at {SHA[:12]}")

    schedule = f"/admin/catalog/benchmarkconfig/{config.pk}/schedule/"
    help_text = maintainer_client.get(schedule).context["form"].fields["head_sha"].help_text
    assert "cannot be followed yet" in help_text and "'adhoc' branch" in help_text
    page = maintainer_client.post(schedule, {"queue": "cpu", "cron": "0 3 * * *",
                                             "repo": "pytorch/ao", "head_branch": "main",
                                        "head_sha": SHA},
                                  follow=True)
    entry = PeriodicTask.objects.get(task=TASK)
    assert json.loads(entry.kwargs) == {"config": config.name, "queue": "cpu",
                                        "repo": "pytorch/ao", "head_branch": "main",
                                        "head_sha": SHA}
    messages = shown_messages(page)
    assert f"measuring {SHA[:12]}" in messages[0]
    assert len(messages) == 1
    from benchsite.catalog.tasks import submit_scheduled

    scheduled = Job.objects.get(pk=submit_scheduled.apply(kwargs=json.loads(entry.kwargs)).get())
    assert (scheduled.head_branch, scheduled.head_sha, scheduled.submitted_via) == (
        "main", SHA, "schedule")
