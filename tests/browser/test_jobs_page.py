"""The job page follows a job's progress live, without reloading under the user's hands."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from benchsite.jobs import submit, tasks
from benchsite.jobs.submit import submit_job
from tests.jobs.conftest import FAST_TIMING, SMALL_SPEC, filesystem_worker  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.browser, pytest.mark.torch, pytest.mark.django_db(transaction=True)]


def test_progress_updates_live_and_the_page_never_reloads(page, monkeypatch):
    monkeypatch.setattr(submit, "enqueue", lambda job: None)  # no worker has the cells yet
    job = submit_job(SMALL_SPEC, name="small.yml", queue="cpu", via="api", timing=FAST_TIMING)
    page.goto(f"/jobs/{job.pk}/")
    assert page.locator("#job-count").inner_text() == "0 / 4"
    page.evaluate("window.marker = 'still the same page'")
    for cell in job.cells.all():
        tasks.run_cell.apply(args=[cell.pk])
    # a locator, not wait_for_function: the site's CSP refuses the eval that one runs
    expect(page.locator("#job-count")).to_have_text("4 / 4", timeout=15000)
    assert page.locator("#job-status").inner_text() == "succeeded"
    assert page.locator("#cells td.status-succeeded").count() == 4
    assert page.locator("#job-ended").is_visible()
    assert page.evaluate("window.marker") == "still the same page"


SLOW_TIMING = {"min_pairs": 40, "max_pairs": 40, "warmup_s": 0.0, "min_sample_s": 0.01}
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


@pytest.mark.usefixtures("filesystem_worker")
def test_live_progress_of_a_job_on_the_embedded_worker(page, api, make_token):
    """The embedded default: the API answers once the job is queued, a real worker process on
    the filesystem broker runs it, and the open page follows it cell by cell."""
    response = api.post("/api/v3/jobs", {"spec": SMALL_SPEC, "queue": "cpu",
                                         "timing": SLOW_TIMING}, format="json",
                        HTTP_AUTHORIZATION=f"Bearer {make_token('pytorch/ao')}")
    assert response.status_code == 201 and response.json()["status"] == "pending"
    page.goto(response.json()["url"])
    page.evaluate("""() => {
      window.marker = 'still the same page';
      window.seen = [document.getElementById('job-count').textContent];
      new MutationObserver(() => window.seen.push(
        document.getElementById('job-count').textContent)).observe(
        document.getElementById('job-count'), {childList: true, characterData: true,
                                               subtree: true});
    }""")
    # a locator, not wait_for_function: the site's CSP refuses the eval that one runs
    expect(page.locator("#job-count")).to_have_text("4 / 4", timeout=240_000)
    seen = page.evaluate("window.seen")
    assert {"1 / 4", "2 / 4", "3 / 4"} & set(seen), seen  # followed while it ran
    assert page.locator("#job-status").inner_text() == "succeeded"
    assert page.locator("#cells td.status-succeeded").count() == 4
    assert page.locator("#job-ended").is_visible()
    assert page.evaluate("window.marker") == "still the same page"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for width, height in ((1440, 900), (1280, 720)):
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=SCREENSHOTS / f"job-live-{width}x{height}.png", full_page=True)
