"""The compilers page in Debian's Chromium, on demo data: the summary tables, a filter that
changes the URL and the numbers, and the drill-down to one backend and suite."""

from pathlib import Path

import pytest
from django.core.management import call_command

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


@pytest.fixture
def demo(transactional_db):
    call_command("load_demo", "--nights", "8")


def table_text(page, name):
    return page.locator(f'table[data-table="{name}"]').inner_text()


def test_summary_filter_and_drill_down(page, demo):
    page.goto("/compilers/")
    passrate = table_text(page, "passrate")
    assert "inductor" in passrate and "100%, 8/8 → 100%, 8/8" in passrate
    before = table_text(page, "geomean speedup")
    assert "→" in before
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "compilers.png"), full_page=True)

    page.select_option('select[name="mode"]', "training")
    page.wait_for_url("**mode=training*")
    assert table_text(page, "geomean speedup") != before

    page.locator('table[data-table="geomean speedup"] a').first.click()
    page.wait_for_url("**/compilers/models/?*backend=*")
    models = page.locator('table[data-table="models"] tbody tr')
    assert models.count() == 8
    assert "→" in models.first.inner_text()
    page.screenshot(path=str(SHOTS / "compilers-models.png"), full_page=True)
    page.get_by_role("link", name="All backends and suites").click()
    page.wait_for_url("**/compilers/?*")
    assert "backend=" not in page.url and "mode=training" in page.url
