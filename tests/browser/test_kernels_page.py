"""The fused kernels page in Chromium on demo data: every chart drawn, the shared filter
form (repo -> branch -> device -> commit -> dtype), the commit filter changes the URL, the
CSV downloads. Screenshot: var/screenshots/kernels.png."""

from pathlib import Path

import pytest
from django.core.management import call_command

from benchsite.results.demo import sha

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


@pytest.fixture
def demo(transactional_db):
    call_command("load_demo", "--nights", "3")


def test_kernels_page_charts_filter_and_csv(page, demo, tmp_path):
    page.goto("/")
    page.locator("nav.top a", has_text="Kernels").click()
    page.wait_for_url("**/kernels/")
    page.locator(".js-plotly-plot").nth(7).wait_for()
    traces = page.evaluate(
        "() => [...document.querySelectorAll('.js-plotly-plot')].map(plot => plot.data.map("
        "t => [t.name, t.y.filter(v => v !== null).length]))")
    assert len(traces) == 8  # 4 kernels x forward, backward
    assert all(chart == [["eager", 3], ["compiled:max-autotune-no-cudagraphs", 3],
                         ["liger", 3], ["peak 3,350 GB/s", 3]] for chart in traces)
    boxes = page.evaluate("() => [...document.querySelectorAll('.chart')].map(chart => {"
                          "const box = chart.getBoundingClientRect(); return [box.x, box.y]; })")
    assert len({y for _, y in boxes}) < len(boxes)  # a grid: several charts to a row
    geomean = page.locator('table[data-table="geomean"]').inner_text()
    assert "liger\tall" in geomean and "24/24" in geomean
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "kernels.png"), full_page=True)

    selects = page.evaluate("() => [...document.querySelectorAll('#filters select')].map("
                            "select => [select.name, select.value])")
    assert selects == [["repo", "pytorch/pytorch"], ["branch", "main"],
                       ["arch", "NVIDIA H100 80GB HBM3"], ["sha", sha(2)], ["dtype", "bfloat16"]]
    page.select_option('select[name="sha"]', sha(0))
    page.wait_for_url(f"**sha={sha(0)}*")
    page.locator(".js-plotly-plot").nth(7).wait_for()
    assert page.locator('select[name="sha"]').input_value() == sha(0)

    with page.expect_download() as download:
        page.locator('section.table:has(table[data-table="geomean"]) a.csv').click()
    saved = tmp_path / "geomean.csv"
    download.value.save_as(saved)
    assert saved.read_text().splitlines()[0] == (
        "backend,direction,geomean speedup over eager,95% CI,points")
