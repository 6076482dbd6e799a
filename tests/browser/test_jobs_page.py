"""The job page follows a job's progress live, without reloading under the user's hands."""

import pytest

from benchsite.jobs import submit, tasks
from benchsite.jobs.submit import submit_job
from tests.jobs.conftest import FAST_TIMING, SMALL_SPEC

pytestmark = [pytest.mark.browser, pytest.mark.torch, pytest.mark.django_db(transaction=True)]


def test_progress_updates_live_and_the_page_never_reloads(page, monkeypatch):
    monkeypatch.setattr(submit, "enqueue", lambda job: None)  # no worker has the cells yet
    job = submit_job(SMALL_SPEC, name="small.yml", queue="cpu", via="api", timing=FAST_TIMING)
    page.goto(f"/jobs/{job.pk}/")
    assert page.locator("#job-count").inner_text() == "0 / 4"
    page.evaluate("window.marker = 'still the same page'")
    for cell in job.cells.all():
        tasks.run_cell.apply(args=[cell.pk])
    page.wait_for_function("document.getElementById('job-count').textContent === '4 / 4'",
                           timeout=15000)
    assert page.locator("#job-status").inner_text() == "succeeded"
    assert page.locator("#cells td.status-succeeded").count() == 4
    assert page.locator("#job-ended").is_visible()
    assert page.evaluate("window.marker") == "still the same page"
