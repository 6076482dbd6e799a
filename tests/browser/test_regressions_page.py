"""The regressions page in Chromium: a group expands to its members, and its compare link
leads to the comparison of its range (not a dead end)."""

import pytest

from benchsite.regressions.models import AlertGroup
from tests.regressions.factory import levels, sha, store_history

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
