"""A maintainer adds a recipe and a config that uses it, runs it, and finds its results."""

import io
import json

import pytest
from django.core.management import call_command

from benchsite.catalog.validation import BUILD_TIMEOUT_S
from tests.catalog.conftest import CUSTOM_INT8, tiny_spec, user_in
from tests.jobs.conftest import FAST_TIMING

pytestmark = [pytest.mark.browser, pytest.mark.torch, pytest.mark.django_db(transaction=True)]


def test_recipe_config_run_now_and_results_on_the_quantization_page(page):
    from benchsite.jobs.models import Job

    call_command("bootstrap_roles", stdout=io.StringIO())
    user_in("maintainers", "maintainer")
    # Each recipe save builds the config in a child process that imports torch: on a loaded
    # CI machine that alone can take a minute, and the server gives it BUILD_TIMEOUT_S.
    page.set_default_timeout((BUILD_TIMEOUT_S + 60) * 1000)
    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", "maintainer")
    page.fill("#id_password", "a-long-password-1")
    page.click("input[type=submit]")

    page.goto("/admin/catalog/recipe/add/")
    page.fill("#id_name", "my_int8")
    page.fill("#id_config", "torchao.quantization.Int8WeightOnlyConfig")
    page.fill("#id_kwargs", json.dumps({"group_sise": 32}))
    page.click("input[name=_save]")
    assert "unexpected keyword argument 'group_sise'" in page.locator(
        ".field-kwargs .errorlist").inner_text()
    page.fill("#id_kwargs", json.dumps(CUSTOM_INT8["kwargs"]))
    page.check("#id_devices input[value=cpu]")
    with page.expect_navigation():
        page.click("input[name=_save]")
    assert "was added successfully" in page.content(), page.locator("#content").inner_text()

    page.goto("/admin/catalog/benchmarkconfig/add/")
    page.fill("#id_name", "tiny_cpu")
    page.fill("#id_spec_yaml", tiny_spec("my_int8"))
    page.fill("#id_timing", json.dumps(FAST_TIMING))
    page.click("input[name=_continue]")
    check = page.locator(".messagelist").inner_text()
    assert "Version 1 saved. 2 cells (quantization). Queue cpu (cpu): 2 run, 0 skipped." in check

    page.click("text=Run now")
    page.select_option("#id_queue", "cpu")
    page.click("input[type=submit]")
    job = Job.objects.get()
    assert f"job {job.pk} queued, 2 cells on queue cpu" in page.locator(
        ".messagelist").inner_text()
    assert f"job {job.pk}: succeeded, queue cpu" in page.locator(
        ".field-recent_jobs").inner_text()

    page.click("text=on the quantization page")
    page.wait_for_selector("table[data-table=cells]")
    rows = page.locator("table[data-table=cells] tbody tr")
    assert rows.count() == 2
    assert {rows.nth(i).locator("td").first.inner_text() for i in range(2)} == {"my_int8"}
    assert rows.nth(0).locator("td").nth(1).inner_text() == "32-64-64"
