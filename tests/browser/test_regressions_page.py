"""The regressions page in Chromium: a group expands to its members, and its compare link
leads to the comparison of its range (not a dead end); an accuracy regression's chart."""

import pytest

from benchsite.regressions.models import AlertGroup, Regression
from tests.regressions.factory import H100, levels, sha, store_history, upload

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_group_expands_to_its_members_and_links_its_comparison(page):
    # Detection runs on each upload: two series step at night 30, one group.
    store_history({"<b>layer</b>": levels(40, step_at=30, step=0.3),
                   "linear": levels(40, step_at=30, step=0.3, seed=5)})
    group = AlertGroup.objects.get()
    assert group.first_bad_sha == sha(30)

    page.goto("/regressions/")
    row = page.locator(f'tbody.group[data-group="{group.pk}"]')
    members = row.locator("table.members")
    assert not members.is_visible()
    row.locator("details summary").click()
    assert members.is_visible()
    assert members.locator("tbody tr").count() == 2
    assert "<b>layer</b>" in members.inner_text()  # a name from an upload stays text

    with page.expect_navigation() as navigation:
        row.locator("a.compare").click()
    assert navigation.value.status == 200
    assert f"/compare/{sha(29)}...{sha(30)}" in page.url
    series = page.locator('table[data-table="series"]').inner_text()
    assert "linear" in series and "<b>layer</b>" in series

    page.go_back()
    with page.expect_navigation() as navigation:
        page.locator(f'tbody.group[data-group="{group.pk}"] a.group-link').click()
    assert navigation.value.status == 200
    assert page.locator("h1").inner_text().startswith(f"Alert group {group.pk}")


def accuracy_record(outcome: str) -> dict:
    """A compiler benchmark's accuracy check: a string result, no number."""
    return {"benchmark": {"name": "TorchInductor", "mode": "training", "dtype": "amp",
                          "extra_info": {"device": "cuda", "arch": H100}},
            "model": {"name": "BERT_pytorch", "type": "model", "backend": "inductor",
                      "origins": ["torchbench"]},
            "metric": {"name": "accuracy", "benchmark_values": [],
                       "extra_info": {"benchmark_values": [outcome]}},
            "runners": [{"name": "cuda", "type": H100}]}


def test_an_accuracy_regression_draws_its_pass_fail_strip_within_the_page(page):
    """pass -> fail at night 12: the chart shows each night's outcome (not an empty chart),
    the magnitude reads "pass → fail", and the page has no horizontal scroll at 1440 px."""
    for night in range(16):
        upload(night, [accuracy_record("pass" if night < 12 else "fail_accuracy")])
    regression = Regression.objects.get(series__metric="accuracy")
    assert (regression.last_good_sha, regression.first_bad_sha) == (sha(11), sha(12))
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(regression.get_absolute_url())
    page.locator(".js-plotly-plot").first.wait_for()
    drawn = page.evaluate("""() => document.querySelector('.js-plotly-plot').data
      .map(t => (t.z || t.y || []).flat().filter(v => v !== null && v !== undefined).length)""")
    assert sum(drawn) >= 16, drawn  # every night's outcome
    text = page.locator("main").inner_text()
    assert "pass → fail" in text and "-100.0 %" not in text
    width = page.evaluate("[document.documentElement.scrollWidth, "
                          "document.documentElement.clientWidth]")
    assert width[0] <= width[1], width
