"""Every page of the site on the demo, as a person opens it, at 1440x900 and 1280x720: each
default view is drawn without browser errors, is at most 4,000 px tall and needs no
horizontal scroll (nor does any of its tables inside its box). Screenshots go to
var/screenshots/<page>-<width>x<height>.png (full page)."""

from pathlib import Path

import pytest
from django.core.management import call_command

from benchsite.regressions.models import NightlyReport, Regression
from benchsite.results.demo import sha
from benchsite.results.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
VIEWPORTS = [(1440, 900), (1280, 720)]
TALLEST = 4000  # px: a default view a person reads, not a dump
NIGHTS = 40  # past the demo's environment change (night 30): its regression is the newest


@pytest.fixture
def demo(transactional_db):
    call_command("load_demo", "--nights", str(NIGHTS))


def site_pages() -> dict[str, str]:
    """Each page by name, at the URL a person reaches it by: the navigation's links, and for
    pages of one thing, the newest of its kind."""
    run = Run.objects.filter(repo="pytorch/ao").latest("timestamp")
    regression = Regression.objects.filter(group__isnull=False).latest("first_bad_at")
    report = NightlyReport.objects.latest("pk")
    return {
        "home": "/", "quantization": "/quantization/", "compilers": "/compilers/",
        "compiler-models": "/compilers/models/", "kernels": "/kernels/",
        "instructions": "/instructions/", "trends": "/trends/", "explorer": "/explorer/",
        "compare": f"/compare/{sha(NIGHTS - 2)}...{sha(NIGHTS - 1)}?repo=pytorch/ao",
        "run": f"/runs/{run.pk}/", "jobs": "/jobs/", "regressions": "/regressions/",
        "regression": regression.get_absolute_url(),
        "alert-group": regression.group.get_absolute_url(),
        "reports": "/regressions/reports/", "report": report.get_absolute_url(),
        "recipes": "/recipes/", "login": "/accounts/login/", "api-docs": "/api/docs/",
    }


# How far the page, and each table's box, is wider than the window (px; 0: it fits).
OVERFLOW = """() => {
  const edge = document.documentElement.clientWidth;
  const over = [["page", document.documentElement.scrollWidth - edge]];
  for (const box of document.querySelectorAll("section.table")) {
    const table = box.querySelector("table");
    over.push([`table ${table && table.dataset.table}`, box.scrollWidth - box.clientWidth]);
  }
  return over.filter(([, px]) => px > 1);
}"""


def test_every_page_fits_at_both_sizes(page, demo):
    SHOTS.mkdir(parents=True, exist_ok=True)
    too_tall, too_wide = [], []
    for name, url in site_pages().items():
        for width, height in VIEWPORTS:
            page.set_viewport_size({"width": width, "height": height})
            response = page.goto(url)
            assert response.status == 200, (name, url, response.status)
            page.wait_for_load_state("networkidle")
            tall = page.evaluate("document.documentElement.scrollHeight")
            page.screenshot(path=str(SHOTS / f"{name}-{width}x{height}.png"), full_page=True)
            if tall > TALLEST:
                too_tall.append(f"{name} ({url}) at {width}x{height}: {tall} px")
            if over := page.evaluate(OVERFLOW):
                too_wide.append(f"{name} ({url}) at {width}x{height}: {over}")
    assert not too_tall, "taller than 4,000 px by default:\n" + "\n".join(too_tall)
    assert not too_wide, "wider than the window (px too wide):\n" + "\n".join(too_wide)


def test_the_error_page_says_what_to_change(browser, live_server, transactional_db):
    context = browser.new_context(base_url=live_server.url,
                                  viewport={"width": 1280, "height": 720})
    page = context.new_page()
    response = page.goto("/runs/999999/")
    assert response.status == 404
    assert "There is no run 999999" in page.get_by_role("alert").inner_text()
    page.get_by_role("link", name="The latest runs").click()
    page.wait_for_url(f"{live_server.url}/")
    icon = page.request.get(f"{live_server.url}/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"] == "image/x-icon"
    page.goto("/runs/999999/")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "error-404-1280x720.png"), full_page=True)
    context.close()
