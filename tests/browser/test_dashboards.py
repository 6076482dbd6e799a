"""The dashboards in Debian's Chromium: charts have data, filters change the URL and the data,
CSV downloads, and untrusted names stay text. Screenshots go to var/screenshots/."""

import json
import re
from pathlib import Path

import pytest
from django.core.management import call_command

from benchsite.results.demo import sha
from benchsite.results.ingest import store_upload
from benchsite.results.models import Run
from tests.results.samples import TORCHAO, record

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
H100 = "NVIDIA H100 80GB HBM3"
XSS = "<img src=x onerror=alert(1)>"


@pytest.fixture
def demo(transactional_db):
    call_command("load_demo", "--nights", "8")


def shot(page, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def traces(page, index=0):
    page.locator(".js-plotly-plot").nth(index).wait_for()
    return page.evaluate(
        "(i) => document.querySelectorAll('.js-plotly-plot')[i].data.map(t => ({name: t.name,"
        " points: (t.z || t.y).flat().filter(v => v !== null).length}))", index)


def table_text(page, name):
    return page.locator(f'table[data-table="{name}"]').inner_text()


def test_quantization_heatmap_compare_and_csv(page, demo, tmp_path):
    page.goto(f"/quantization/?arch={H100}")
    [heatmap] = traces(page)
    assert heatmap["points"] == 7 * 20  # recipes and the baseline, x shapes
    assert "Sanity check (baseline vs baseline)" in page.locator("p.sanity").inner_text()
    assert "95% CI" in table_text(page, "cells")
    before = table_text(page, "geomean")
    shot(page, "quantization")

    base = page.locator('select[name="base"] option').nth(8)  # the oldest commit
    page.select_option('select[name="base"]', base.get_attribute("value"))
    page.wait_for_url("**base=*")
    assert len(traces(page, 1)) == 1  # the change heatmap
    assert table_text(page, "geomean") != before
    assert "speedup change %" in table_text(page, "cells")
    shot(page, "quantization-compare")

    with page.expect_download() as download:
        page.locator('section.table:has(table[data-table="cells"]) a.csv').click()
    saved = tmp_path / "cells.csv"
    download.value.save_as(saved)
    header = saved.read_text().splitlines()[0]
    assert header.startswith("recipe,shape (M-K-N),bf16 ms,quantized ms,speedup")


def test_trends_filter_changes_url_and_data(page, demo):
    page.goto("/trends/?repo=pytorch/pytorch")
    speedups = traces(page, 0)
    assert {t["name"] for t in speedups} == {"inductor", "aot_eager"}
    assert all(t["points"] == 8 for t in speedups)
    assert traces(page, 1)  # the passrate chart
    # a point's hover: its day, its geomean and its counts (sent as numbers, not text)
    hover = page.evaluate(
        "() => { const gd = document.querySelectorAll('.js-plotly-plot')[0];"
        " const k = gd.data[0].y.findIndex(v => v !== null);"
        " Plotly.Fx.hover(gd, [{curveNumber: 0, pointNumber: k}]);"
        " return [gd.data[0].x[k], gd.data[0].name, gd.data[0].customdata[k],"
        " document.querySelector('.hoverlayer').textContent]; }")
    day, name, (points, runs), text = hover
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", day) and name in text, hover
    assert text.endswith(f"{points} points, {runs} runs") and points > 0, hover
    before = table_text(page, "summary")
    page.select_option('select[name="mode"]', "training")
    page.wait_for_url("**mode=training*")
    assert table_text(page, "summary") != before
    shot(page, "trends")


def test_explorer_and_drill_down_from_quantization(page, demo):
    page.goto(f"/quantization/?arch={H100}")
    page.locator('table[data-table="cells"] a', has_text="4096-4096-8192").first.click()
    page.wait_for_url("**/explorer/?*model=*")
    assert len(traces(page, 0)) == 1
    assert "Fwd Speedup (x)" in table_text(page, "series")
    shot(page, "explorer")
    page.goto("/explorer/?repo=vllm-project/vllm&metric=median_itl_ms")
    assert "% of target" in table_text(page, "series")


def test_home_and_run_pages(page, demo):
    page.goto("/")
    page.locator('table[data-table="latest runs"] a').first.click()
    page.wait_for_url("**/runs/*/")
    assert "Commit" in page.locator("dl.run").inner_text()
    shot(page, "run")
    bad_night = Run.objects.get(repo="pytorch/ao", head_sha=sha(6), arch=H100)
    page.goto(f"/runs/{bad_night.pk}/")
    warning = page.get_by_role("alert").first
    assert warning.is_visible() and "Sanity check (baseline vs baseline)" in warning.inner_text()
    assert "Unstable speedups" in page.locator("dl.run").inner_text()
    shot(page, "run-suspect")


def test_untrusted_names_render_as_text(page, transactional_db):
    evil = record(TORCHAO, repo="pytorch/ao", head_branch="main", head_sha="e" * 40,
                  model={"name": XSS, "origins": [XSS]},
                  benchmark={**TORCHAO["benchmark"], "dtype": XSS})
    store_upload(json.dumps([evil]).encode())
    page.on("dialog", lambda dialog: pytest.fail(f"a dialog opened: {dialog.message}"))
    page.goto("/explorer/?repo=pytorch/ao")
    assert XSS in table_text(page, "series")
    assert XSS in page.locator(".js-plotly-plot .legendtext").first.text_content()
    page.goto("/quantization/")
    assert XSS in page.locator(".js-plotly-plot").first.text_content()  # the recipe axis
    assert XSS in table_text(page, "geomean")
    shot(page, "untrusted-names")


def test_the_navs_compare_opens_the_newest_two_nightlies(page, demo):
    page.goto("/")
    page.locator("nav.top a", has_text="Compare").click()
    page.wait_for_url(f"**/compare/{sha(6)}...{sha(7)}?repo=pytorch%2Fao")
    assert traces(page, 0)  # the largest changes
    assert f"Compare {sha(6)[:10]}...{sha(7)[:10]}" in page.content()
    assert table_text(page, "series")


def test_compare_page_from_the_quantization_page(page, demo):
    page.goto(f"/quantization/?arch={H100}")
    oldest = page.locator('select[name="base"] option').last.get_attribute("value")
    page.select_option('select[name="base"]', oldest)
    page.wait_for_url("**base=*")
    page.get_by_text("Every series of these two commits").click()
    page.wait_for_url(lambda url: "/compare/" in url)
    assert traces(page, 0)  # the largest changes
    before = table_text(page, "series")
    page.select_option('select[name="metric"]', "Fwd Speedup (x)")
    page.wait_for_url("**metric=*")
    assert table_text(page, "series") != before
    shot(page, "compare")


FITS = """() => {
  const edge = document.documentElement.clientWidth;
  const cell = (name, column) => {
    const table = document.querySelector(`table[data-table="${name}"]`);
    const heads = [...table.querySelectorAll("thead th")];
    const at = heads.findIndex(th => th.textContent.trim() === column);
    const row = table.querySelector("tbody tr");
    return {head: heads[at].getBoundingClientRect().right,
            cell: row.children[at].getBoundingClientRect().right};
  };
  return {
    edge, page: document.documentElement.scrollWidth,
    hidden: [...document.querySelectorAll("section.table")]
      .filter(s => s.scrollWidth > s.clientWidth + 1)
      .map(s => s.querySelector("table").dataset.table),
    why: (() => {
      const line = document.querySelector('table[data-table="series"] tr.detail td');
      return {text: line.textContent, right: line.getBoundingClientRect().right};
    })(),
    last: cell("summary", [...document.querySelectorAll(
      'table[data-table="summary"] thead th')].at(-1).textContent.trim()),
  };
}"""


def test_the_compare_page_fits_1440_px_with_each_rows_why_visible(page, demo):
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"/compare/{sha(0)}...{sha(7)}?repo=pytorch%2Fao")
    assert table_text(page, "series") and "why: " in table_text(page, "series")
    fits = page.evaluate(FITS)
    assert fits["page"] <= fits["edge"], fits  # no horizontal scroll of the page
    assert fits["hidden"] == [], fits  # no table scrolled inside its section either
    assert fits["why"]["right"] <= fits["edge"] and fits["why"]["text"].startswith("why: ")
    assert fits["last"]["head"] <= fits["edge"] and fits["last"]["cell"] <= fits["edge"], fits
    shot(page, "compare-1440")
