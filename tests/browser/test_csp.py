"""Chromium enforces the site's Content-Security-Policy: the pages' own scripts, plotly.js,
the inline scripts with the response's nonce and Swagger UI run, and no console message
says the policy blocked anything."""

import pytest
from django.core.management import call_command

from benchsite.jobs.models import Job
from benchsite.results.demo import sha

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def violations(page):
    """Console messages about the policy (the page fixture also fails on any error)."""
    found = []
    page.on("console", lambda message: "Content Security Policy" in message.text
            and found.append(message.text))
    return found


def test_pages_and_charts_run_under_the_policy(page, violations, transactional_db):
    call_command("load_demo", "--nights", "8")
    response = page.goto("/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.goto(f"/compare/{sha(6)}...{sha(7)}?repo=pytorch/ao")
    page.locator(".js-plotly-plot").first.wait_for()  # plotly.js drew, styles and all
    page.goto("/quantization/")
    page.locator(".js-plotly-plot").first.wait_for()
    assert violations == []


def test_an_inline_script_with_the_nonce_runs(page, violations, transactional_db):
    job = Job.objects.create(name="smoke", spec_yaml="{}", queue="cpu", status="running",
                             cells_total=1)
    page.goto(job.get_absolute_url())  # a running job's page polls its JSON
    Job.objects.filter(pk=job.pk).update(status="succeeded", cells_done=1)
    page.locator("#job-ended").wait_for(state="visible")  # the poll ran and saw it end
    assert violations == []


def test_api_docs_run_under_the_policy(page, violations, transactional_db):
    page.goto("/api/docs/")
    page.locator(".opblock-summary-path").first.wait_for(timeout=15000)
    assert violations == []


def test_the_admins_forms_run_under_the_policy(page, violations, admin_user):
    """Django's admin loads its scripts from files; django-celery-beat's schedule form has an
    inline one, which our copy of its template gives the nonce."""
    page.goto("/admin/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "password")
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    page.goto("/admin/django_celery_beat/periodictask/add/")
    page.locator("#id_crontab").wait_for(state="attached")
    assert page.locator(".field-crontab_translation").is_hidden()  # the inline script ran
    assert violations == []
