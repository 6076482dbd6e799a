"""The nightly report: states per series (environment changes apart), markdown, JSON (the
day's environment changes, the triage precision), the command, notification once,
its pages and the home page's last-24-hours panel."""

import json
import re
from datetime import UTC, date, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.html import escape
from django_celery_beat.models import PeriodicTask

from benchsite import links
from benchsite.regressions import precision
from benchsite.regressions import report as reports
from benchsite.regressions.detection import detect_series
from benchsite.regressions.models import (
    AlertGroup,
    NightlyReport,
    NotificationTarget,
    Regression,
    SilenceAlert,
)
from benchsite.results.models import EnvironmentChange, Run, Series
from tests.regressions.factory import (
    DAY,
    H100,
    START,
    at,
    levels,
    make_regression,
    record,
    store_history,
    upload,
)

pytestmark = pytest.mark.django_db
A100 = "NVIDIA A100-SXM4-80GB"
NIGHT = 27  # the night the step at night 25 is raised (3 points at the new level)
HOSTILE = "<b>bench</b> | *x* [y](z)"


def night_day(night: int) -> date:
    return datetime.fromtimestamp(START + night * DAY, UTC).date()


@pytest.fixture
def history():
    """On the H100, 30 nights: a regression and an improvement from night 25 (raised on
    night 27), two nights far out on nights 26-27 (too few for a change point), and a
    steady series; on the A100, a series reporting since night 20 only."""
    blip = levels(26, seed=3) + [[3.0, 3.0, 3.0]] * 2 + levels(2, seed=4)
    series = store_history({"worse": levels(30, step_at=25, step=0.3),
                            "better": levels(30, step_at=25, step=-0.3, seed=2),
                            "blip": blip, "steady": levels(30, seed=1)})
    for offset, values in enumerate(levels(10, seed=5)):
        upload(20 + offset, [record("young", values, arch=A100)], job=1)
    found = detect_series([s.pk for s in series.values()], "main")
    assert {(r.series.model, r.kind, r.detected_at.date()) for r in found} == {
        ("worse", "regression", night_day(NIGHT)), ("better", "improvement", night_day(NIGHT))}
    return found


def test_each_series_is_counted_in_its_state_per_benchmark_and_device(history):
    with CaptureQueriesContext(connection) as queries:
        report = reports.build_report("pytorch/ao", "main", night_day(NIGHT))
    assert len(queries) < 20  # histories are read in one query per chunk, not per series
    a100, h100 = report.rows
    assert h100 == {"benchmark": "micro-benchmark api", "device": "cuda", "arch": H100,
                    "total": 4, "regression": 1, "environment": 0, "improvement": 1,
                    "suspicious": 1, "no_regression": 1, "insufficient_data": 0,
                    "groups": sorted({r.group_id for r in history})}
    assert (a100["arch"], a100["total"], a100["insufficient_data"]) == (A100, 1, 1)
    assert reports.totals(report.rows)["total"] == 5

    # Two nights later nothing is raised: the step, raised on an earlier night, is not
    # suspicious again (the HUD policy sees the points since it), the young series has 9
    # points; the blip's night has passed.
    later = reports.build_report("pytorch/ao", "main", night_day(NIGHT + 2))
    a100, h100 = later.rows
    assert (h100["regression"], h100["improvement"], h100["suspicious"]) == (0, 0, 0)
    assert h100["no_regression"] == 4 and h100["groups"] == []
    assert (a100["insufficient_data"], a100["no_regression"]) == (0, 1)

    # Building again replaces the day's report.
    again = reports.build_report("pytorch/ao", "main", night_day(NIGHT))
    assert again.pk == report.pk and NightlyReport.objects.count() == 2
    assert reports.build_report("pytorch/ao", "main", night_day(40)).rows == []


def state_on(night: int) -> str:
    """The state of the one series reported on that night."""
    [row] = reports.build_report("pytorch/ao", "main", night_day(night)).rows
    [state] = [state for state in reports.STATES if row[state]]
    assert row["total"] == 1
    return state


def stepped(nights: int) -> tuple:
    """A time 20 % worse from night 20, raised by detection on night 22 (its first bad
    point night 20), with `nights` nights stored."""
    series = store_history({"stepped": levels(nights, step_at=20, step=0.2)})["stepped"]
    [found] = detect_series([series.pk], "main")
    assert (found.kind, found.detector, found.detected_at.date(), found.first_bad_at) == (
        "regression", "changepoint", night_day(22), at(20))
    return series, found


def test_a_change_raised_on_an_earlier_night_is_not_suspicious_again():
    stepped(28)
    assert state_on(22) == reports.REGRESSION
    # The HUD policy's windows on the whole history still see the step (nights 21-24
    # against a baseline of nights 15-20), but the points since it are too few for them.
    assert state_on(24) == reports.NO_REGRESSION
    assert state_on(27) == reports.NO_REGRESSION


def test_a_new_change_on_top_of_a_raised_one_is_suspicious():
    series, _ = stepped(26)
    worse = [[value * 1.2 for value in night]
             for night in levels(3, level=2.4, seed=7)]  # nights 26-28: 20 % worse again
    store_history({"stepped": worse}, first_night=26)
    assert state_on(25) == reports.NO_REGRESSION
    # The points since night 20: nights 20-25 the baseline, nights 26-27 / 26-28 worse.
    assert state_on(27) == reports.SUSPICIOUS
    assert state_on(28) == reports.SUSPICIOUS
    assert Regression.objects.filter(series=series).count() == 1  # nothing raised it


def test_a_past_night_rebuilt_knows_only_the_changes_raised_by_then():
    stepped(28)
    # Night 21: the step's first bad point has passed, detection raised it on night 22; a
    # report of night 21 built now says what the HUD policy saw that night.
    assert state_on(21) == reports.SUSPICIOUS


def test_a_change_triaged_as_a_false_positive_does_not_cut_the_history():
    _, found = stepped(25)
    Regression.objects.filter(pk=found.pk).update(state=Regression.State.FALSE_POSITIVE)
    assert state_on(24) == reports.SUSPICIOUS  # the HUD policy on the whole history


def test_the_markdown_is_a_github_comment_with_names_escaped(settings):
    settings.BENCH_SITE_URL = "https://bench.example/"
    store_history({"m<1>": levels(12)}, benchmark=HOSTILE, arch="GPU | *fast*")
    report = reports.build_report("pytorch/ao", "main", night_day(11))
    text = reports.report_markdown(report)
    assert text.startswith("## Nightly benchmark report: pytorch/ao @ main, ")
    assert "**1 series**: 0 regressions, 0 environment changes, 0 suspicious, " \
           "0 improvements, 1 no regression, 0 insufficient data." in text
    assert "### &lt;b&gt;bench&lt;/b&gt; \\| \\*x\\* \\[y\\](z)" in text
    assert "<b>" not in text and "GPU \\| \\*fast\\*" in text
    [row] = [line for line in text.splitlines() if line.startswith("| GPU")]
    assert len(re.findall(r"(?<!\\)\|", row)) == 10  # 9 cells: no table break
    assert f"(https://bench.example/regressions/reports/{report.pk}/)" in text
    assert "(https://bench.example/trends/?repo=pytorch%2Fao&benchmark=%3Cb%3Ebench" in text


def test_the_json_has_totals_rows_and_absolute_links(history, settings):
    settings.BENCH_SITE_URL = "https://bench.example"
    report = reports.build_report("pytorch/ao", "main", night_day(NIGHT))
    data = json.loads(json.dumps(reports.report_json(report)))
    assert set(data) == {"id", "repo", "branch", "day", "url", "markdown_url",
                         "regressions_url", "created_at", "notified_at", "totals", "groups",
                         "rows", "environment_changes", "precision"}
    assert (data["repo"], data["branch"], data["day"]) == ("pytorch/ao", "main",
                                                            str(night_day(NIGHT)))
    assert data["url"] == f"https://bench.example/regressions/reports/{report.pk}/"
    assert data["totals"] == {"total": 5, "regression": 1, "environment": 0, "suspicious": 1,
                              "improvement": 1, "no_regression": 1, "insufficient_data": 1}
    row = data["rows"][1]
    assert set(row) == {"benchmark", "device", "arch", "total", "regression", "environment",
                        "suspicious", "improvement", "no_regression", "insufficient_data",
                        "links"}
    assert row["links"]["trends"].startswith("https://bench.example/trends/?repo=pytorch%2Fao")
    assert row["links"]["regressions"].startswith("https://bench.example/regressions/?state=any")
    assert [g["id"] for g in row["links"]["groups"]] == sorted({r.group_id for r in history})
    assert all(g["url"].startswith("https://bench.example/") for g in data["groups"])
    assert data["notified_at"] is None


def test_the_command_prints_reports_and_fails_clearly_when_there_is_nothing(history, capsys):
    with pytest.raises(CommandError, match="unknown repo 'nobody/nothing'"):
        call_command("nightly_report", repo="nobody/nothing", day=str(night_day(NIGHT)))
    with pytest.raises(CommandError, match=f"nothing to report for {night_day(40)}"):
        call_command("nightly_report", day=str(night_day(40)))
    with pytest.raises(CommandError, match="--day 'soon'"):
        call_command("nightly_report", day="soon")

    call_command("nightly_report", day=str(night_day(NIGHT)))
    assert capsys.readouterr().out.startswith("## Nightly benchmark report: pytorch/ao @ main")
    call_command("nightly_report", "--format", "json", "--day", "latest", "--nights", "3",
                 "--repo", "pytorch/ao")
    printed = json.loads(capsys.readouterr().out)
    assert [report["day"] for report in printed] == [str(night_day(n)) for n in (27, 28, 29)]
    assert NightlyReport.objects.filter(notified_at__isnull=False).count() == 0


def test_each_report_is_sent_to_the_matching_targets_once(history, webhook, mailoutbox,
                                                          settings):
    settings.BENCH_SITE_URL = "https://bench.example"
    NotificationTarget.objects.create(name="hook", kind="webhook", url=webhook.url + "/hook")
    NotificationTarget.objects.create(name="slack", kind="slack", url=webhook.url + "/slack")
    NotificationTarget.objects.create(name="team", kind="email", email="team@example.com")
    NotificationTarget.objects.create(name="other", kind="webhook", url=webhook.url + "/other",
                                      benchmark="TorchInductor*")

    [report] = reports.nightly_reports(night_day(NIGHT))
    assert reports.nightly_reports(night_day(NIGHT)) == [report]  # built again: not resent
    call_command("nightly_report", day=str(night_day(NIGHT)), notify=True)

    received = dict(webhook.received)
    assert len(webhook.received) == 2 and set(received) == {"/hook", "/slack"}
    hook = received["/hook"]
    assert set(hook) == {"event", "repo", "branch", "day", "url", "markdown", "rows"}
    assert (hook["event"], hook["day"]) == ("nightly_report", str(night_day(NIGHT)))
    assert hook["markdown"] == reports.report_markdown(report)
    assert len(hook["rows"]) == 2 and hook["rows"][1]["regression"] == 1
    slack = received["/slack"]
    assert slack["text"].startswith("Nightly report pytorch/ao@main")
    assert "1 regression, 1 suspicious of 5 series" in slack["text"]
    assert f"<https://bench.example/regressions/reports/{report.pk}/|Full report>" in (
        slack["blocks"][1]["text"]["text"])
    [mail] = mailoutbox
    assert mail.subject == f"[benchsite] {reports.headline(report)}"
    assert mail.body == reports.report_markdown(report)
    report.refresh_from_db()
    assert report.notified_at is not None


def test_the_nightly_report_is_scheduled_daily_at_six_utc():
    task = PeriodicTask.objects.get(task="benchsite.regressions.tasks.nightly_report")
    assert (task.crontab.hour, task.crontab.minute, str(task.crontab.timezone)) == (
        "6", "0", "UTC")


def test_the_report_pages(history, client):
    report = reports.build_report("pytorch/ao", "main", night_day(NIGHT))
    listed = client.get("/regressions/reports/")
    assert listed.status_code == 200
    assert f'href="/regressions/reports/{report.pk}/"' in listed.content.decode()
    assert client.get("/regressions/reports/?format=json").json()["tables"][0]["rows"][0][:5] \
        == [str(night_day(NIGHT)), "pytorch/ao", "main", 5, 1]

    page = client.get(f"/regressions/reports/{report.pk}/")
    html = page.content.decode()
    assert page.status_code == 200 and H100 in html and A100 in html
    assert 'id="markdown"' in html and "## Nightly benchmark report" in html
    assert "/trends/?repo=pytorch%2Fao" in html
    as_json = client.get(f"/regressions/reports/{report.pk}/?format=json")
    assert as_json.json()["totals"]["regression"] == 1
    markdown = client.get(f"/regressions/reports/{report.pk}/?format=markdown")
    assert markdown["Content-Type"].startswith("text/markdown")
    assert markdown.content.decode() == reports.report_markdown(report)
    csv = client.get(f"/regressions/reports/{report.pk}/?format=csv")
    assert csv.status_code == 200 and "insufficient data" in csv.content.decode()
    assert client.get("/regressions/reports/999999/").status_code == 404


def test_the_home_page_shows_the_last_24_hours(client):
    group = AlertGroup.objects.create(repo="pytorch/ao", branch="main", first_bad_sha="b" * 40,
                                      first_bad_at=timezone.now())
    report = NightlyReport.objects.create(repo="pytorch/ao", branch="main",
                                          day=date(2025, 11, 7), rows=[])
    SilenceAlert.objects.create(key="k", repo="pytorch/ao", arch="Silent GPU 9000",
                                last_seen=timezone.now() - timedelta(days=3),
                                usual_gap=timedelta(days=1), runs_seen=9)
    html = client.get("/").content.decode()
    assert "Last 24 hours" in html and "Nothing in the last 24 hours" not in html
    assert escape(links.group_url(group.pk)) in html and "0 members" in html
    assert report.get_absolute_url() in html and "Silent GPU 9000" in html


def test_the_home_page_falls_back_to_the_latest_when_the_last_day_was_quiet(history, client):
    old = timezone.now() - timedelta(days=30)
    report = reports.build_report("pytorch/ao", "main", night_day(NIGHT))
    NightlyReport.objects.update(created_at=old)
    AlertGroup.objects.update(created_at=old)  # its members were detected in 2025
    html = client.get("/").content.decode()
    assert "Nothing in the last 24 hours" in html
    assert report.get_absolute_url() in html
    group = Regression.objects.filter(kind="regression").get().group
    assert escape(links.group_url(group.pk)) in html and "1 regression)" in html
    assert "Every device that reports regularly is reporting." in html


ENVIRONMENT = "torch 2.10.0.dev20251019 -> 2.10.0.dev20251020"


def environment_change(night: int, branch: str = "main", **fields) -> EnvironmentChange:
    """The environment of the nightly job's runs changed from the night before to `night`
    (on the H100)."""
    before, after = (Run.objects.filter(head_branch__in=["main", branch], timestamp__lt=at(
        n + 1)).latest("timestamp") for n in (night - 1, night))
    return EnvironmentChange.objects.create(
        repo="pytorch/ao", branch=branch, device="cuda", arch=H100, name="nightly",
        before_run=before, after_run=after, at=after.timestamp,
        summary=fields.pop("summary", ENVIRONMENT), **fields)


def test_a_change_coinciding_with_an_environment_change_is_counted_apart(webhook, settings):
    settings.BENCH_SITE_URL = "https://bench.example"
    series = store_history({name: levels(12, seed=seed)
                            for seed, name in enumerate(["env", "code", "better", "both"])})
    change = environment_change(11)
    environment_change(10, summary="driver 550 -> 560")  # another day
    upload(11, [record("other", [1.0])], branch="release", job=1)
    environment_change(11, branch="release", summary="CUDA 12.8 -> 12.9")  # another branch
    make_regression(series["env"], 8, environment_change=change)  # detected on night 11
    make_regression(series["code"], 8)
    # a change of an earlier night that a record raised on this one coincides with
    earlier = environment_change(8, summary="triton 3.4.0 -> 3.5.0")
    make_regression(series["better"], 8, kind="improvement", magnitude=-0.2,
                    environment_change=earlier)
    make_regression(series["both"], 8, environment_change=change)
    make_regression(series["both"], 8, detector="hud_policy")  # the code's: a regression

    report = reports.build_report("pytorch/ao", "main", night_day(11))
    [row] = report.rows
    assert {state: row[state] for state in reports.STATES} == {
        "regression": 2, "environment": 2, "suspicious": 0, "improvement": 0,
        "no_regression": 0, "insufficient_data": 0}
    assert reports.STATES[:2] == ("regression", "environment")

    data = reports.report_json(report)
    assert data["totals"]["environment"] == 2 and data["rows"][0]["environment"] == 2
    assert data["environment_changes"] == [
        {"at": at(8).isoformat(), "device": "cuda", "arch": H100, "name": "nightly",
         "summary": "triton 3.4.0 -> 3.5.0"},
        {"at": at(11).isoformat(), "device": "cuda", "arch": H100, "name": "nightly",
         "summary": ENVIRONMENT}]
    text = reports.report_markdown(report)
    assert "**4 series**: 2 regressions, 2 environment changes, 0 suspicious, " in text
    assert "| Device | Total | Regressions | Environment changes | Suspicious |" in text
    assert "### Environment changes" in text
    assert f"- {at(11):%Y-%m-%d %H:%M} {H100} · nightly: torch 2.10.0.dev20251019 -&gt; " \
           "2.10.0.dev20251020" in text
    assert "driver" not in text and "CUDA" not in text

    NotificationTarget.objects.create(name="slack", kind="slack", url=webhook.url + "/slack")
    reports.nightly_reports(night_day(11))
    [(_, slack)] = webhook.received
    assert f"• environment · {H100}: torch 2.10.0.dev20251019 -&gt; 2.10.0.dev20251020" in (
        slack["blocks"][1]["text"]["text"])


def test_the_report_has_the_triage_precision_of_its_repo_and_branch():
    series = store_history({"steady": levels(12)})
    upload(3, [record("flaky", [1.0], benchmark="flaky")], job=1)
    flaky = Series.objects.get(benchmark="flaky")
    for night in range(3, 8):  # detected on nights 6..10
        make_regression(flaky, night, magnitude=0.05, state="false_positive")
    make_regression(series["steady"], 8, state="fixed")  # detected on night 11
    make_regression(series["steady"], 9, state="false_positive")  # night 12: after the day
    upload(3, [record("flaky", [1.0], benchmark="flaky")], repo="pytorch/pytorch", job=2)
    make_regression(Series.objects.get(repo="pytorch/pytorch"), 5, state="false_positive")

    report = reports.build_report("pytorch/ao", "main", night_day(11))
    shown = reports.report_json(report)["precision"]
    assert shown["days"] == 90 and "benchmarks" not in shown
    changepoint = shown["detectors"][0]
    assert (changepoint["detector"], changepoint["labels"], changepoint["valid"],
            changepoint["invalid"]) == ("changepoint", 6, 1, 5)
    [flaky_row] = shown["below_floor"]
    assert (flaky_row["benchmark"], flaky_row["labels"], flaky_row["precision"]) == (
        "flaky", 5, 0.0)
    [suggestion] = flaky_row["suggestions"]
    assert (suggestion["threshold"], suggestion["avoided"], suggestion["missed"]) == (
        0.055, 5, 0)

    text = reports.report_markdown(report)
    assert "### Triage precision (last 90 days)" in text
    score = precision.Score(valid=1, invalid=5)
    assert f"| change point | 6 | 1 | 5 | {score.text} | 0 |" in text
    assert "| HUD policy |" not in text  # no alerts: no row
    assert "- flaky: 0 % (0–43 %) of 5 labels; a threshold of 5.5 % for flaky (\\*time\\*, " \
           "now 4 %) would have avoided 5 invalid alerts and missed 0 valid ones" in text


def test_a_report_stored_before_the_environment_state_still_reads(client):
    old = {"benchmark": "b", "device": "cuda", "arch": H100, "total": 2, "regression": 1,
           "suspicious": 0, "improvement": 0, "no_regression": 1, "insufficient_data": 0,
           "groups": []}
    report = NightlyReport.objects.create(repo="pytorch/ao", branch="main",
                                          day=date(2025, 11, 7), rows=[old])
    assert reports.totals(report.rows)["environment"] == 0
    assert reports.report_json(report)["rows"][0]["environment"] == 0
    assert "0 environment changes" in reports.report_markdown(report)
    assert client.get(report.get_absolute_url()).status_code == 200
    assert client.get("/regressions/reports/").status_code == 200
