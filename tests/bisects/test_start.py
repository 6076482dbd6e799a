"""Starting bisects (API, regression, alert group, page buttons) and what a finished one
leaves: its page, the culprit on the regression and told to its targets. Nothing runs here
(the task is queued on commit, which these tests do not reach)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

from benchsite.bisects import execute
from benchsite.bisects.lab import SiteLab, label
from benchsite.bisects.models import Bisect, BisectStep, describe
from benchsite.bisects.notify import tell_culprit
from benchsite.bisects.search import CULPRIT, Outcome
from benchsite.bisects.start import BisectRefused, start_group, start_regression, start_spec
from benchsite.jobs.models import Job, JobCell
from benchsite.regressions import notify
from benchsite.regressions.models import NotificationTarget
from benchsite.results.models import Series
from runner.sources import demo
from tests.regressions.factory import make_group, make_regression, record, sha, upload

pytestmark = pytest.mark.django_db
KEY = "custom/demo_mlp/eager/eval/float32/cpu/bsdefault"  # the demo spec's one cell


def api_body(named, **fields):
    return {"spec": demo.SPEC, "source": named.name, "good": "a" * 40, "bad": "b" * 40,
            **fields}


def test_a_bisect_from_a_spec_checks_its_cells_source_queue_and_code(source):
    bisect = start_spec(spec_yaml=demo.SPEC, spec_name="demo.yml", source=source, good="v1",
                        bad="main")
    assert bisect.cells[0]["key"] == KEY and bisect.family == "compilers"
    assert bisect.state == "pending" and bisect.branch == f"bisect/{bisect.pk}"
    two = demo.SPEC.replace("backends: [eager]", "backends: [eager, aot_eager]")
    with pytest.raises(BisectRefused, match="needs one cell; 2 are selected"):
        start_spec(spec_yaml=two, spec_name="two.yml", source=source, good="a", bad="b")
    with pytest.raises(BisectRefused, match="selects none of the spec's 1 cells"):
        start_spec(spec_yaml=demo.SPEC, spec_name="d.yml", source=source, good="a", bad="b",
                   cells="inductor")
    with pytest.raises(BisectRefused, match="queue 'gpu9': unknown"):
        start_spec(spec_yaml=demo.SPEC, spec_name="d.yml", source=source, good="a", bad="b",
                   queue="gpu9")
    with pytest.raises(BisectRefused, match="names code from modules no admin has allowed: "
                                            "otherpkg.model:make"):
        start_spec(spec_yaml=demo.SPEC.replace("demopkg", "otherpkg"), spec_name="d.yml",
                   source=source, good="a", bad="b")


@pytest.mark.django_db(transaction=True)  # the task is sent once the start commits
def test_the_api_needs_a_token_with_submit_jobs_its_repo_and_queue(
        source, api, make_token, monkeypatch):
    from benchsite.bisects import tasks

    monkeypatch.setattr(tasks.run_bisect, "apply_async", lambda **kwargs: None)  # no worker

    def post(token, **fields):
        return api.post("/api/v3/bisects", api_body(source, **fields), format="json",
                        HTTP_AUTHORIZATION=f"Bearer {token}")

    assert post(make_token("demo/*", scopes=["upload"])).status_code == 403
    assert "may not run bisects for 'demo/pkg'" in post(make_token("pytorch/ao")).json()[
        "detail"]
    assert "may submit only to ['cuda']" in post(make_token("demo/pkg", queues=["cuda"])
                                                 ).json()["detail"]
    refused = post(make_token("demo/pkg"), source="/tmp/any/path")
    assert refused.status_code == 400 and "no such source" in refused.json()["detail"]
    missing = api.post("/api/v3/bisects", {"spec": demo.SPEC}, format="json",
                       HTTP_AUTHORIZATION=f"Bearer {make_token('demo/pkg')}")
    assert "missing: source, good, bad" in str(missing.json())

    created = post(make_token("demo/pkg"))
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["state"] == "pending" and body["culprit_sha"] == "" and body["steps"] == []
    assert body["cells"] == [KEY] and body["source"] == "demo"
    got = api.get(f"/api/v3/bisects/{body['id']}").json()
    assert got["id"] == body["id"] and got["branch"] == f"bisect/{body['id']}"
    pending = api.get(f"/bisects/{body['id']}/")  # the page of a bisect not started yet
    assert pending.status_code == 200 and "Pending" in pending.content.decode()


@pytest.fixture
def measured_regression(source):
    return job_measured_regression()


def job_measured_regression():
    """A regression whose results a job of the demo spec measured (nights 0-5, 3x slower
    from night 3)."""
    job = Job.objects.create(name="demo.yml", family="compilers", spec_yaml=demo.SPEC,
                             queue="cpu", submitted_via="api", repo="demo/pkg",
                             head_branch="main", head_sha=sha(3))
    for night in range(6):
        stored = upload(night, [record("demo_mlp", [1.0 if night < 3 else 3.0] * 3)],
                        repo="demo/pkg")
        if night == 3:
            JobCell.objects.create(job=job, index=0, key=KEY, cell={"model": "demo"},
                                   upload=stored.upload)
    return make_regression(Series.objects.get(repo="demo/pkg"), 3, magnitude=2.0)


def test_a_regression_bisects_its_range_with_its_jobs_spec_and_cell(measured_regression):
    bisect = start_regression(measured_regression)
    assert (bisect.good_ref, bisect.bad_ref) == (sha(2), sha(3))
    assert bisect.cells[0]["key"] == KEY and bisect.metric == "Quantized Fwd Time (ms)"
    assert bisect.worse == 1 and bisect.min_change == 1.0  # lower is better; half of +200 %
    assert bisect.regression == measured_regression

    group = make_group(measured_regression)
    assert start_regression(measured_regression).pk != bisect.pk
    assert start_group(group).regression == measured_regression


def test_a_regression_no_job_measured_cannot_be_bisected(source):
    for night in range(4):
        upload(night, [record("m", [1.0] * 3)], repo="demo/pkg")
    series = Series.objects.get(repo="demo/pkg", model="m")
    with pytest.raises(BisectRefused, match="not measured by a job of this site"):
        start_regression(make_regression(series, 2))


def test_the_bisect_buttons_need_the_permission(client, measured_regression):
    page = measured_regression.get_absolute_url()
    user = User.objects.create_user("perf", password="pw")
    client.force_login(user)
    assert 'id="bisect"' not in client.get(page).content.decode()
    assert client.post(f"{page}bisect").status_code == 302 and not Bisect.objects.exists()
    user.user_permissions.add(Permission.objects.get(codename="add_bisect"))
    assert 'id="bisect"' in client.get(page).content.decode()
    response = client.post(f"{page}bisect")
    bisect = Bisect.objects.get()
    assert response.url == bisect.get_absolute_url() and bisect.submitted_by == user
    group = make_group(measured_regression)
    assert 'id="bisect"' in client.get(group.get_absolute_url()).content.decode()
    response = client.post(f"{group.get_absolute_url()}bisect")
    assert response.url == Bisect.objects.first().get_absolute_url()


def finished(bisect, shas):
    """The bisect as a worker leaves it after measuring two commits: 1.0 then 3.0."""
    bisect.state, bisect.commits, bisect.good_sha, bisect.bad_sha = "running", shas, shas[0], \
        shas[1]
    bisect.metric = "abs_latency"
    bisect.save()
    for position, level in ((0, 1.0), (1, 3.0)):
        BisectStep.objects.create(
            bisect=bisect, position=position, sha=shas[position], subject=f"commit {position}",
            author="A <a@example.com>", rounds=[{"upload": None, "with": 1 - position,
                                                 "values": {label(KEY, "abs_latency"):
                                                            [level] * 6}}])
    execute.finish(bisect, SiteLab(bisect), Outcome(
        CULPRIT, "+200.0% from its parent", culprit=1, magnitude=2.0, p_value=0.002,
        original_change=2.0, worse=1, verdicts={0: "good", 1: "bad"}))
    bisect.refresh_from_db()
    return bisect


def test_a_culprit_is_written_on_the_regression_told_once_and_charted(
        measured_regression, client, django_capture_on_commit_callbacks, monkeypatch):
    sent = []
    monkeypatch.setattr(notify, "post_json", lambda url, payload: sent.append(payload) or 200)
    NotificationTarget.objects.create(name="hook", kind="webhook", url="https://h.example/x",
                                      repo="demo/*")
    bisect = start_regression(measured_regression)
    with django_capture_on_commit_callbacks(execute=True):
        bisect = finished(bisect, [sha(2), sha(3)])
    assert bisect.state == "culprit" and bisect.culprit_sha == sha(3)
    assert bisect.outcome["culprit"]["url"] == f"https://git.example/demo/commit/{sha(3)}"
    note = measured_regression.events.order_by("-pk").first().note
    assert note.startswith(f"bisect {bisect.pk}: culprit {sha(3)[:12]} \"commit 1\"")
    [payload] = sent
    assert payload["event"] == "culprit" and payload["items"][0]["sha"] == sha(3)
    assert payload["items"][0]["regression"] == measured_regression.pk
    assert tell_culprit(bisect) is False and len(sent) == 1  # told once

    regression_page = client.get(measured_regression.get_absolute_url()).content.decode()
    assert f"culprit <code class=\"culprit\">{sha(3)[:12]}</code> commit 1" in regression_page
    page = client.get(bisect.get_absolute_url())
    html = page.content.decode()
    assert page.status_code == 200 and 'id="culprit"' in html and sha(3) in html
    figure = client.get(bisect.get_absolute_url(), {"format": "json"}).json()["figures"][0]
    points, medians, culprit = figure["data"]
    assert len(points["y"]) == 12 and medians["y"] == [1.0, 3.0]
    assert culprit["x"] == [f"1: {sha(3)[:8]}"]
    assert describe(bisect)["steps"][1]["values"] == [3.0] * 6
