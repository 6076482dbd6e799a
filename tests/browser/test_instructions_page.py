"""The instruction counts page in Chromium on demo data: it opens on the 3% step (the largest
recent change), coloured; picking another base keeps it, a benchmark's name draws its chart,
sorting goes into the URL."""

import pytest
from django.core.management import call_command

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo(transactional_db):
    call_command("load_demo", "--nights", "8")


def chart(page):
    page.locator(".js-plotly-plot").first.wait_for()
    return page.evaluate("() => document.querySelector('.js-plotly-plot').data.map("
                         "t => ({name: t.name, points: t.y.filter(v => v !== null).length}))")


def test_pick_a_base_see_the_step_and_chart_another_benchmark(page, demo):
    from tests.browser.test_dashboards import shot

    page.goto("/instructions/")
    rows = page.locator('table[data-table="benchmarks"] tbody tr')
    assert rows.count() == 64
    # the default pair is the largest recent change: the 3% step of the third-last night
    assert page.locator("td.worse").count() == 1
    assert page.locator("p.summary").first.inner_text().startswith(
        "The largest change among the last 10 commits: linear [eager, forward, 1 thread], +3.")

    oldest = page.locator('select[name="base"] option').last.get_attribute("value")
    page.select_option('select[name="base"]', oldest)
    page.wait_for_url(f"**base={oldest}*")
    worse = page.locator("td.worse")
    assert worse.count() == 1 and 2.7 < float(worse.inner_text()) < 3.3
    first = rows.first.inner_text()
    assert first.startswith("linear\teager\tforward\t1")
    [trace] = chart(page)
    assert trace == {"name": "linear [eager, forward, 1 thread]", "points": 8}
    shot(page, "instructions")

    page.locator('table[data-table="benchmarks"] a', has_text="mlp").first.click()
    page.wait_for_url("**benchmark=mlp*")
    assert chart(page)[0]["name"].startswith("mlp [")

    page.select_option('select[name="sort"]', "name")
    page.wait_for_url("**sort=name*")
    assert rows.first.inner_text().startswith("add\t")
