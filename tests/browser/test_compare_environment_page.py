"""The compare page's Environment table in Chromium: a long change wraps inside the page at
1440 px instead of widening it."""

import pytest

from tests.regressions.factory import H100, record, sha, upload, with_torch

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
LONG = "2.11.0.dev20261121+cu130.git" + "0123456789abcdef" * 6  # one unbreakable word


def test_the_environment_table_fits_1440_px(page):
    for night, torch in ((1, "2.11.0.dev20261120+cu130"), (2, LONG)):
        upload(night, [with_torch(record(f"model-{n}", [1.0, 1.01, 0.99]), torch)
                       for n in range(3)])
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"/compare/{sha(1)}...{sha(2)}?repo=pytorch%2Fao")
    table = page.locator('table[data-table="environment"]')
    assert H100 in table.inner_text() and LONG[:20] in table.inner_text()
    fits = page.evaluate("""() => ({
      edge: document.documentElement.clientWidth,
      page: document.documentElement.scrollWidth,
      table: document.querySelector('table[data-table="environment"]')
        .getBoundingClientRect().right})""")
    assert fits["page"] <= fits["edge"] and fits["table"] <= fits["edge"], fits
