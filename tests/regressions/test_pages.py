"""The regressions page (alert groups, the CSV of regressions, JSON), a regression's page,
triage permissions and the chart payload. Groups in detail: test_groups.py."""

import csv
import io
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Permission, User

from benchsite.regressions.charts import points, series_chart_payload
from benchsite.regressions.detection import detect_series
from benchsite.regressions.models import AlertGroup, Regression, SilenceAlert
from benchsite.results.models import Result
from dashboards.pages.regressions import MEMBERS_LISTED
from tests.regressions.factory import levels, make_group, make_regression, sha, store_history

pytestmark = pytest.mark.django_db
HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture
def found():
    series = store_history({HOSTILE: levels(40, step_at=25, step=0.3),
                            "=cmd|' /C calc'!A0": levels(40, step_at=20, step=0.25, seed=2)})
    detect_series([s.pk for s in series.values()], "main")  # a record (and group) per series
    return Regression.objects.select_related("series")


@pytest.fixture
def triager(client):
    user = User.objects.create_user("triager", password="pw")
    user.user_permissions.add(Permission.objects.get(codename="change_regression"))
    client.force_login(user)
    return user


def rows(answer) -> int:
    return len(re.findall(r'href="/regressions/\d+/"', answer.content.decode()))


def test_the_list_shows_current_groups_with_filters_in_the_url(client, found,
                                                               django_assert_max_num_queries):
    assert found.count() == 2 and AlertGroup.objects.count() == 2
    found.filter(series__model=HOSTILE).update(state="fixed")
    # count, page, groups, their members, silence alerts; the detection settings (3) and
    # the triage precision's counts (one aggregate query)
    with django_assert_max_num_queries(9):
        page = client.get("/regressions/")
    assert page.status_code == 200
    html = page.content.decode()
    assert rows(page) == 1  # the fixed one's group is closed, not current
    assert 'href="/regressions/groups/' in html
    assert rows(client.get("/regressions/?state=any")) == 2
    assert "&lt;img src=x onerror=alert(1)&gt;" in client.get(
        "/regressions/?state=any").content.decode()
    assert "<img src=x" not in client.get("/regressions/?state=any").content.decode()
    assert rows(client.get("/regressions/?state=fixed&detector=changepoint")) == 1
    assert "No regressions match" in client.get("/regressions/?device=A100").content.decode()
    assert rows(client.get("/regressions/?device=h100&kind=regression")) == 1
    bogus = client.get("/regressions/?state=bogus").content.decode()
    assert "state: Select a valid choice" in bogus


def test_the_list_downloads_as_csv_with_formulas_defused(client, found):
    answer = client.get("/regressions/?state=any&format=csv")
    assert answer["Content-Type"] == "text/csv"
    rows = list(csv.DictReader(io.StringIO(answer.content.decode())))
    assert len(rows) == 2
    assert {row["model"] for row in rows} == {HOSTILE, "'=cmd|' /C calc'!A0"}
    assert {row["first_bad_sha"] for row in rows} == {sha(25), sha(20)}
    assert rows[0]["url"].startswith("http://testserver/regressions/")
    groups = {str(r.group_id) for r in found}
    assert {row["group"] for row in rows} == groups and {row["branch"] for row in rows} == {
        "main"}


def test_the_list_is_json_too(client, found):
    answer = client.get("/regressions/?state=any&format=json")
    assert answer.status_code == 200
    data = answer.json()
    assert data["filters"]["state"] == "any" and data["filters"]["page"] == 1
    regressions, groups = data["tables"]
    assert (regressions["name"], groups["name"]) == ("regressions", "groups")
    assert len(regressions["rows"]) == 2 and len(groups["rows"]) == 2
    newest = dict(zip(groups["columns"], groups["rows"][0], strict=True))
    assert (newest["first_bad_sha"], newest["members"], newest["state"]) == (sha(25), 1, "open")
    assert newest["compare"].startswith(f"http://testserver/compare/{sha(24)}...{sha(25)}")
    bad = client.get("/regressions/?state=bogus&format=json")
    assert bad.status_code == 200 and bad.json()["tables"][0]["rows"] == []


def test_a_large_group_lists_its_largest_changes_and_links_to_all(client):
    """The list shows a group's MEMBERS_LISTED largest changes, regressions first (its counts
    over all of them), and links to the group's page, which shows every member."""
    series = store_history({f"model{n}": levels(3) for n in range(MEMBERS_LISTED + 3)})
    members = [make_regression(item, 2, magnitude=0.01 * (n + 1))
               for n, item in enumerate(series.values())]
    improvement = members.pop()  # the largest change, but an improvement: after regressions
    improvement.kind = Regression.Kind.IMPROVEMENT
    improvement.save(update_fields=["kind"])
    group = make_group(*members, improvement)
    page = client.get("/regressions/").content.decode()
    shown = [int(pk) for pk in re.findall(r'href="/regressions/(\d+)/"', page)]
    largest = sorted(members, key=lambda m: -m.magnitude)[:MEMBERS_LISTED]
    assert shown == [m.pk for m in largest]
    assert (f"The {MEMBERS_LISTED} largest of {len(members) + 1} members (regressions first): "
            f'<a href="/regressions/groups/{group.pk}/">all on the group') in page
    data = client.get("/regressions/", {"format": "json"}).json()
    regressions, groups = data["tables"]
    assert len(regressions["rows"]) == MEMBERS_LISTED
    group_row = dict(zip(groups["columns"], groups["rows"][0], strict=True))
    assert group_row["members"] == len(members) + 1
    assert rows(client.get(f"/regressions/groups/{group.pk}/")) == len(members) + 1


def test_a_regression_page_charts_the_series_escaped(client, found):
    regression = found.get(series__model=HOSTILE, detector="changepoint")
    page = client.get(regression.get_absolute_url())
    html = page.content.decode()
    assert page.status_code == 200
    assert "<img src=x" not in html
    assert "/static/plotly/plotly.min.js" in html
    assert sha(24) in html and sha(25) in html  # last good .. first bad
    assert "HUD policy now" in html and "Log in</a> to triage" in html
    assert 'href="/accounts/login/?next=' in html  # the site's login, not the admin's
    assert "table: micro-benchmark api / Quantized Fwd Time (ms)" in html  # why lower is better
    figure = json.loads(html.split('<script id="chart-data" type="application/json">')[1]
                        .split("</script>")[0])
    assert figure["layout"]["title"]["text"].startswith("micro-benchmark api / &lt;img src=x")
    assert len(figure["data"][1]["x"]) == 40
    as_json = client.get(regression.get_absolute_url() + "?format=json").json()
    assert as_json["figures"] == [figure]
    assert as_json["tables"][0]["rows"][0][1:4] == ["detector", None, "open"]


def test_the_chart_payload_marks_changes_and_escapes_every_label(found):
    regression = found.get(series__model=HOSTILE, detector="changepoint")
    results = points(Result.objects.filter(series=regression.series).order_by("timestamp"))
    figure = series_chart_payload(regression.series, results)
    repetitions, medians = figure["data"]
    assert len(repetitions["y"]) == 3 * 40 and len(medians["y"]) == 40
    assert all("<" not in text for text in medians["text"])
    shapes = figure["layout"]["shapes"]
    lines = [s for s in shapes if s["type"] == "line"]
    assert {line["x0"] for line in lines} == {regression.first_bad_at.isoformat()}
    assert len(figure["layout"]["annotations"]) == 1
    band = next(s for s in shapes if s["yref"] == "y")
    assert band["y0"] < regression.baseline < band["y1"]
    assert band["y1"] / regression.baseline - 1 < 0.03  # baseline +- the noise (~1 %)
    # One record per change: the HUD policy's finding is evidence on it.
    assert len(lines) == 1 and all(a["text"].startswith("Regression +3")
                                   for a in figure["layout"]["annotations"])
    assert all("<" not in a["hovertext"] for a in figure["layout"]["annotations"])
    without = series_chart_payload(regression.series, results, [], repetitions=False)
    assert len(without["data"]) == 1 and without["layout"]["shapes"] == []


def test_triage_needs_a_login_and_the_permission(client, found):
    regression = found.get(series__model=HOSTILE, detector="changepoint")
    url = f"/regressions/{regression.pk}/triage"
    anonymous = client.post(url, {"state": "false_positive"})
    assert anonymous.status_code == 302
    assert anonymous["Location"] == f"/accounts/login/?next=/regressions/{regression.pk}/"
    client.force_login(User.objects.create_user("viewer", password="pw"))
    assert client.post(url, {"state": "false_positive"}).status_code == 403
    assert "You may not triage" in client.get(regression.get_absolute_url()).content.decode()
    regression.refresh_from_db()
    assert regression.state == "open" and regression.events.count() == 1


def test_a_triager_changes_the_state_with_a_note(client, found, triager):
    regression = found.get(series__model=HOSTILE, detector="changepoint")
    answer = client.post(f"/regressions/{regression.pk}/triage",
                         {"state": "false_positive", "note": "noisy runner"}, follow=True)
    assert "Marked false positive." in answer.content.decode()
    regression.refresh_from_db()
    assert regression.state == "false_positive"
    event = regression.events.last()
    assert (event.user, event.from_state, event.to_state, event.note) == (
        triager, "open", "false_positive", "noisy runner")
    refused = client.post(f"/regressions/{regression.pk}/triage", {"state": "gone"},
                          follow=True)
    assert "state: Select a valid choice" in refused.content.decode()
    assert client.get(f"/regressions/{regression.pk}/triage").status_code == 405


def test_silent_devices_are_listed(client, found):
    SilenceAlert.objects.create(key="k", repo="pytorch/ao", device="cuda", arch="NVIDIA A100",
                                last_seen=datetime(2025, 1, 1, tzinfo=UTC),
                                usual_gap=timedelta(days=1), runs_seen=9)
    html = client.get("/regressions/").content.decode()
    assert "device NVIDIA A100" in html


def test_a_regression_page_says_when_noise_leaves_the_place_open(client, monkeypatch):
    from benchsite.regressions import detection
    from benchsite.regressions.detect import Detection

    store_history({"ranged": levels(40)})
    monkeypatch.setattr(detection.changepoint, "detect_many", lambda series, *args: [
        [Detection(index=33, earliest=31, detected_at=39, before=2.0, after=2.4,
                   confidence=1e-9)] for _ in series])
    [raised] = detect_series([Result.objects.first().series_id], "main")
    assert (raised.last_good_sha, raised.first_bad_sha) == (sha(30), sha(33))
    page = client.get(f"/regressions/{raised.pk}/").content.decode()
    assert "the change is at one of the 3 runs after the last good one" in page
    single = Regression.objects.filter(pk=raised.pk)
    single.update(last_good_sha=sha(32), last_good_at=raised.first_bad_at - timedelta(days=1))
    assert "one of the" not in client.get(f"/regressions/{raised.pk}/").content.decode()
