"""Alert groups on the site: the list (newest first, dates and filters, each group expanded to
its members, links), a group's page, triage of a group and of a member alone, bulk triage
and its permissions, a regression's links and evidence, and the admin."""

import re

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchsite.regressions.models import AlertGroup, DetectionSettings, Regression
from benchsite.results.models import Series
from tests.regressions.factory import at, make_group, make_regression, record, sha, upload

pytestmark = pytest.mark.django_db
A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture
def series():
    for night in range(12):
        upload(night, [record("a", [1.0]), record("b", [1.0]), record("c", [1.0], arch=A100)])
    return {s.model: s for s in Series.objects.all()}


@pytest.fixture
def made(series):
    """Night 8: a group of three (a worse by 20 %, b better by 10 % with a longer range, c
    on the A100 worse by 40 %); night 5: a group of one; night 10: a regression recorded
    before groups existed."""
    eight = [make_regression(series["a"], 8, magnitude=0.2),
             make_regression(series["b"], 8, kind="improvement", magnitude=-0.1, good_night=6),
             make_regression(series["c"], 8, magnitude=0.4)]
    five = [make_regression(series["a"], 5, magnitude=0.1)]
    return {"eight": make_group(*eight), "five": make_group(*five), "members": eight,
            "legacy": make_regression(series["b"], 10, magnitude=0.3)}


def login(client, name: str, permitted: bool) -> User:
    user = User.objects.create_user(name, password="pw")
    if permitted:
        user.user_permissions.add(Permission.objects.get(codename="change_regression"))
    client.force_login(user)
    return user


def listed(html: str) -> list[str]:
    """The rows of the list, in order: "group N" or "regression N"."""
    return re.findall(r'class="group-link">([^<]+)</a>', html)


def row(html: str, group: AlertGroup) -> str:
    start = html.index(f'data-group="{group.pk}"')
    return html[start:html.index("</tbody>", start)]


def test_groups_are_listed_newest_first_with_their_summary_and_links(client, made):
    html = client.get("/regressions/").content.decode()
    eight, five, legacy = made["eight"], made["five"], made["legacy"]
    assert listed(html) == [f"regression {legacy.pk}", f"group {eight.pk}",
                            f"group {five.pk}"]
    assert (eight.last_good_sha, eight.first_bad_sha) == (sha(7), sha(8))  # intersection
    group = row(html, eight)
    assert f"<code>{sha(7)[:10]}</code>..<code>{sha(8)[:10]}</code>" in group
    assert "2 regressions, 1 improvement" in group
    assert f"{A100}, {H100}" in group and "int8dq" in group
    assert "-20.0 %" in group and "-40.0 %" in group  # median and worst, for the better
    compare = f"/compare/{sha(7)}...{sha(8)}?repo=pytorch%2Fao"
    assert f'href="{compare}"' in group
    assert f'href="https://github.com/pytorch/ao/compare/{sha(7)}...{sha(8)}"' in group
    trends = re.search(r'href="(/trends/\?[^"]+)" class="trends"', group).group(1)
    assert "benchmark=micro-benchmark+api" in trends and "branch=main" in trends
    # Expandable to its members, each linked to its page.
    details = group[group.index("<details>"):]
    assert "3 members (3 open)" in details
    assert sorted(re.findall(r'href="/regressions/(\d+)/"', details)) == sorted(
        str(m.pk) for m in made["members"])
    assert "+40.0 %" in details  # each member's own change
    # Its links are not dead ends.
    for url in (compare, trends.replace("&amp;", "&"), eight.get_absolute_url()):
        assert client.get(url).status_code == 200, url


def test_queries_do_not_grow_with_the_groups_listed(client, made, series):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/regressions/?state=any").status_code == 200
        return len(captured)

    DetectionSettings.load()  # made once, by the first page that reads them
    few = queries()
    for night in (2, 3, 4):
        make_group(make_regression(series["c"], night), make_regression(series["b"], night))
    assert queries() == few <= 10  # 6, the detection settings (3) and the triage precision


def test_the_date_range_and_the_filters_select_groups(client, made):
    eight, five, legacy = made["eight"], made["five"], made["legacy"]

    def rows(query: str) -> list[str]:
        answer = client.get(f"/regressions/?{query}")
        assert answer.status_code == 200
        return listed(answer.content.decode())

    day = {night: at(night).date().isoformat() for night in range(12)}
    assert rows(f"start={day[8]}&end={day[8]}") == [f"group {eight.pk}"]
    assert rows(f"start={day[9]}") == [f"regression {legacy.pk}"]
    assert rows(f"end={day[7]}") == [f"group {five.pk}"]
    assert rows(f"start={day[5]}&end={day[8]}") == [f"group {eight.pk}", f"group {five.pk}"]
    assert "From must be on or before To" in client.get(
        f"/regressions/?start={day[9]}&end={day[8]}").content.decode()
    assert rows(f"device={A100}") == [f"group {eight.pk}"]  # a member on the A100
    assert rows("kind=improvement") == [f"group {eight.pk}"]
    assert rows("repo=pytorch/ao&benchmark=micro-benchmark+api") == listed(
        client.get("/regressions/").content.decode())
    assert rows("repo=pytorch/other") == []
    # A group is current while a member is: one triaged member leaves it listed.
    Regression.objects.filter(pk=made["members"][0].pk).update(state="fixed")
    assert f"group {eight.pk}" in rows("")
    Regression.objects.filter(group=eight).update(state="false_positive")
    assert f"group {eight.pk}" not in rows("")
    assert rows("state=false_positive") == [f"group {eight.pk}"]
    assert f"group {eight.pk}" in rows("state=any")


def test_the_list_pages_25_groups_at_a_time(client, series):
    for night in range(1, 11):
        for model in "abc":
            make_group(make_regression(series[model], night, detector="hud_policy"))
    first = client.get("/regressions/").content.decode()
    second = client.get("/regressions/?page=2").content.decode()
    assert (len(listed(first)), len(listed(second))) == (25, 5)
    assert "page 1 of 2" in first and 'href="?page=2">older</a>' in first
    assert set(listed(first)).isdisjoint(listed(second))
    as_json = client.get("/regressions/?page=2&format=json").json()
    assert len(as_json["tables"][1]["rows"]) == 5 and as_json["filters"]["page"] == 2


def test_the_list_as_csv_and_json(client, made):
    eight = made["eight"]
    lines = client.get("/regressions/?format=csv").content.decode().splitlines()
    assert lines[0].endswith(",branch,group") and len(lines) == 1 + 5
    assert sum(line.endswith(f",main,{eight.pk}") for line in lines) == 3
    assert lines[1].endswith(",main,")  # the ungrouped one, newest
    groups = client.get("/regressions/?format=csv&table=groups").content.decode().splitlines()
    assert groups[0].startswith("group,url,repo,branch,state,") and len(groups) == 1 + 3
    data = client.get("/regressions/?format=json").json()
    by_name = {table["name"]: table for table in data["tables"]}
    summary = [dict(zip(by_name["groups"]["columns"], r, strict=True))
               for r in by_name["groups"]["rows"]]
    assert [s["group"] for s in summary] == [None, eight.pk, made["five"].pk]
    assert summary[1]["worst change"] == pytest.approx(-0.4)
    assert summary[1]["median change"] == pytest.approx(-0.2)
    assert summary[1]["devices"] == f"{A100}, {H100}"
    assert len(by_name["regressions"]["rows"]) == 5


def test_a_groups_page_lists_its_members_with_links(client, made):
    eight = made["eight"]
    page = client.get(eight.get_absolute_url())
    html = page.content.decode()
    assert page.status_code == 200
    assert f"Alert group {eight.pk}: 2 regressions in pytorch/ao@main" in html
    assert f'href="/compare/{sha(7)}...{sha(8)}?repo=pytorch%2Fao"' in html
    assert f"https://github.com/pytorch/ao/compare/{sha(7)}...{sha(8)}" in html
    for member in made["members"]:
        assert f'href="/regressions/{member.pk}/"' in html
    assert "Log in</a> to triage" in html and 'href="/accounts/login/?next=' in html
    data = client.get(eight.get_absolute_url() + "?format=json").json()
    assert data["filters"] == {"group": eight.pk}
    assert [t["name"] for t in data["tables"]] == ["members", "group", "repro"]
    assert len(data["tables"][0]["rows"]) == 3
    assert client.get("/regressions/groups/999999/").status_code == 404


def test_triage_on_a_group_applies_to_its_members_and_a_member_alone(client, made):
    eight = made["eight"]
    url = f"/regressions/groups/{eight.pk}/triage"
    anonymous = client.post(url, {"state": "acknowledged"})
    assert anonymous.status_code == 302
    assert anonymous["Location"] == f"/accounts/login/?next=/regressions/groups/{eight.pk}/"
    login(client, "viewer", permitted=False)
    assert client.post(url, {"state": "acknowledged"}).status_code == 403
    assert "You may not triage" in client.get(eight.get_absolute_url()).content.decode()
    triager = login(client, "triager", permitted=True)
    answer = client.post(url, {"state": "acknowledged", "note": "bisecting"}, follow=True)
    assert "Marked 3 of 3 regressions acknowledged." in answer.content.decode()
    members = Regression.objects.filter(group=eight)
    assert set(members.values_list("state", flat=True)) == {"acknowledged"}
    for member in members:
        event = member.events.last()
        assert (event.user, event.from_state, event.to_state, event.note) == (
            triager, "open", "acknowledged", "bisecting")

    alone = made["members"][1]  # the improvement: expected
    client.post(f"/regressions/{alone.pk}/triage", {"state": "expected"})
    assert dict(members.values_list("pk", "state"))[alone.pk] == "expected"
    assert set(members.exclude(pk=alone.pk).values_list("state", flat=True)) == {
        "acknowledged"}
    html = client.get(eight.get_absolute_url()).content.decode()
    assert "open (2 acknowledged, 1 expected)" in html

    client.post(url, {"state": "fixed"})
    assert set(members.values_list("state", flat=True)) == {"fixed"}
    assert f"group {eight.pk}" not in listed(client.get("/regressions/").content.decode())
    refused = client.post(url, {"state": "gone"}, follow=True)
    assert "state: Select a valid choice" in refused.content.decode()
    assert client.get(url).status_code == 405


def test_bulk_triage_needs_a_login_and_the_permission(client, made):
    eight, five, legacy = made["eight"], made["five"], made["legacy"]
    form = {"groups": [eight.pk, five.pk], "regressions": [legacy.pk], "state": "expected",
            "note": "new kernel", "next": "/regressions/?state=any"}
    anonymous = client.post("/regressions/triage", form)
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith("/accounts/login/?next=/regressions/")
    assert "Log in</a> to triage groups" in client.get("/regressions/").content.decode()
    login(client, "viewer", permitted=False)
    assert client.post("/regressions/triage", form).status_code == 403
    assert 'name="groups"' not in client.get("/regressions/").content.decode()
    assert set(Regression.objects.values_list("state", flat=True)) == {"open"}

    login(client, "triager", permitted=True)
    html = client.get("/regressions/").content.decode()
    assert f'<input type="checkbox" name="groups" value="{eight.pk}"' in html
    assert 'action="/regressions/triage"' in html
    answer = client.post("/regressions/triage", form)
    assert answer.status_code == 302 and answer["Location"] == "/regressions/?state=any"
    page = client.get(answer["Location"]).content.decode()
    assert "Marked 5 of 5 regressions in 2 groups expected." in page
    assert set(Regression.objects.values_list("state", flat=True)) == {"expected"}
    assert all(r.events.last().note == "new kernel" for r in Regression.objects.all())

    empty = client.post("/regressions/triage", {"state": "open", "next": "https://evil.example/"})
    assert empty["Location"] == "/regressions/"  # never off the site
    assert "select at least one group" in client.get("/regressions/").content.decode()


def test_a_regression_page_links_its_group_siblings_and_range(client, made):
    a, b, c = made["members"]
    Regression.objects.filter(pk=a.pk).update(evidence={"hud_policy": {
        "status": "regression", "magnitude": 0.19, "violations": 4}})
    html = client.get(a.get_absolute_url()).content.decode()
    assert f'href="/regressions/groups/{made["eight"].pk}/"' in html
    siblings = html[html.index('id="siblings"'):]
    assert f'href="/regressions/{b.pk}/"' in siblings and f'href="/regressions/{c.pk}/"' in siblings
    assert f'href="/regressions/{a.pk}/"' not in siblings
    assert f'href="/compare/{sha(7)}...{sha(8)}?repo=pytorch%2Fao"' in html
    assert f"https://github.com/pytorch/ao/compare/{sha(7)}...{sha(8)}" in html
    assert 'class="trends"' in html and 'class="explorer"' in html
    assert "HUD policy: regression (+19.0 %, 4 violations in a row)" in html
    assert "<th>Branch</th><td>main</td>" in html
    # b's own range is longer than the group's: its compare page is its own.
    assert f"/compare/{sha(6)}...{sha(8)}" in client.get(b.get_absolute_url()).content.decode()
    legacy = client.get(made["legacy"].get_absolute_url()).content.decode()
    assert "Siblings" not in legacy and "/compare/" in legacy


def test_accuracy_and_missing_metrics_read_as_pass_to_fail_and_present_to_absent(client,
                                                                                series):
    failed = make_regression(series["a"], 9, detector="accuracy")
    gone = make_regression(series["b"], 9, detector="missing")
    group = make_group(failed, gone)
    html = client.get(failed.get_absolute_url()).content.decode()
    assert "pass → fail" in html and "-100.0 %" not in html
    assert "a passing accuracy result became a failure" in html
    assert "present → absent" in client.get(gone.get_absolute_url()).content.decode()
    listing = row(client.get("/regressions/").content.decode(), group)
    assert "pass → fail" in listing and "present → absent" in listing


def test_the_admin_lists_groups_and_triages_their_members(client, made):
    client.force_login(User.objects.create_superuser("admin", password="pw"))
    eight = made["eight"]
    listing = client.get("/admin/regressions/alertgroup/")
    assert listing.status_code == 200 and sha(8) in listing.content.decode()
    change = client.get(f"/admin/regressions/alertgroup/{eight.pk}/change/")
    assert change.status_code == 200 and "micro-benchmark api / a" in change.content.decode()
    client.post("/admin/regressions/alertgroup/",
                {"action": "mark_members_expected", "_selected_action": [eight.pk]})
    assert set(Regression.objects.filter(group=eight).values_list("state", flat=True)) == {
        "expected"}
    assert Regression.objects.get(pk=made["legacy"].pk).state == "open"
    member = made["members"][0]
    page = client.get(f"/admin/regressions/regression/{member.pk}/change/").content.decode()
    assert "Detected at" in page and "Evidence" in page and str(eight) in page
