"""Filters that never dead-end, in Chromium: changing a parent dropdown keeps the children
that still exist, resets the others with a note saying what and why, and draws the chart."""

import pytest
from django.core.management import call_command

from benchsite.results.demo import A100, sha
from tests.browser.test_dashboards import shot, traces

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo(transactional_db):
    call_command("load_demo", "--nights", "8")


def test_a_new_repo_resets_what_it_lacks_with_a_note_and_keeps_the_rest(page, demo):
    page.goto("/trends/")
    assert page.locator("p.note").count() == 0
    page.select_option('select[name="range"]', "30d")
    page.wait_for_url("**range=30d*")

    page.select_option('select[name="repo"]', "pytorch/pytorch")
    page.wait_for_url("**repo=pytorch%2Fpytorch*")
    notes = page.locator("p.note").all_inner_texts()
    assert notes == [
        "Benchmark reset to TorchInductor: 'micro-benchmark api' has no results for Repo "
        "pytorch/pytorch.",
        "Metric reset to speedup: 'Fwd Speedup (x)' has no results for Repo pytorch/pytorch, "
        "Benchmark TorchInductor.",
    ]
    assert page.locator('select[name="range"]').input_value() == "30d"  # still there: kept
    assert page.locator('select[name="benchmark"]').input_value() == "TorchInductor"
    assert all(trace["points"] > 0 for trace in traces(page))
    shot(page, "filters-reset-note")


def test_another_device_keeps_the_commit_it_has(page, demo):
    page.goto(f"/quantization/?sha={sha(3)}")
    page.select_option('select[name="arch"]', A100.arch)
    page.wait_for_url("**arch=NVIDIA+A100*")
    assert page.locator("p.note").count() == 0
    assert page.locator('select[name="sha"]').input_value() == sha(3)
    assert sum(trace["points"] for trace in traces(page)) > 0


@pytest.mark.parametrize("size", [(1440, 900), (1280, 720)], ids=["1440x900", "1280x720"])
def test_default_pages_fit_in_4000_pixels(page, demo, size):
    width, height = size
    page.set_viewport_size({"width": width, "height": height})
    for name, url in [("home", "/"), ("quantization", "/quantization/"), ("trends", "/trends/"),
                      ("explorer", "/explorer/"), ("compilers", "/compilers/"),
                      ("instructions", "/instructions/")]:
        page.goto(url)
        if name not in ("home", "compilers"):
            traces(page)  # drawn
        tall = page.evaluate("document.documentElement.scrollHeight")
        assert tall <= 4000, f"{url} is {tall} px tall at {width}x{height}"
        shot(page, f"{name}-{width}x{height}")
