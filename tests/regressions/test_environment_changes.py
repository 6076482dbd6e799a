"""Environment changes as events (per job and device, on default branches), kept right when
runs arrive late, and regressions that coincide with one: labelled, counted apart and told
only when the settings say so."""

import pytest

from benchsite.regressions import confirmation, notify
from benchsite.regressions.detection import detect_repo, detect_runs
from benchsite.regressions.models import DetectionSettings, NotificationTarget, Regression
from benchsite.results import environment_changes
from benchsite.results.models import EnvironmentChange, Run
from tests.regressions.factory import H100, at, levels, record, upload

A100 = "NVIDIA A100-SXM4-40GB"
OLD, NEW = "2.13.0.dev20261120", "2.13.0.dev20261121"


def torch(version: str) -> dict:
    return {"torch": {"repo": "pytorch/pytorch", "version": version,
                      "extra_info": {"cuda": "12.8"}}, "torchao": {"version": "0.18.0"}}


def night_records(night: int, histories: dict[str, list[list[float]]], arch: str,
                  dependencies: dict) -> list[dict]:
    return [{**record(model, values[night], arch=arch), "dependencies": dependencies}
            for model, values in histories.items()]


def store_nights(nights, histories, arch=H100, bump_at=None, job=0, name_suffix="",
                 detect=True):
    """One upload per night on `arch`, torch bumped from night `bump_at` on; detection
    after each upload, as the site runs it."""
    for night in nights:
        version = NEW if bump_at is not None and night >= bump_at else OLD
        stored = upload(night, night_records(night, histories, arch, torch(version)),
                        job=job)
        if name_suffix:
            Run.objects.filter(upload_id=stored.upload.pk).update(
                name=f"nightly{name_suffix}")
        if detect:
            detect_runs(Run.objects.filter(upload_id=stored.upload.pk))


def test_a_torch_bump_on_one_device_is_one_event_of_that_device(db):
    quiet = {"m": levels(12)}
    store_nights(range(12), quiet, arch=H100, bump_at=7)
    store_nights(range(12), quiet, arch=A100, job=1)  # the same nights, no bump
    [change] = EnvironmentChange.objects.all()
    assert (change.arch, change.branch, change.at) == (H100, "main", at(7))
    assert change.summary == f"torch {OLD} -> {NEW}; cuda unchanged"
    assert change.changes == [{"key": "torch", "before": OLD, "after": NEW}]
    assert (change.before_run.timestamp, change.after_run.timestamp) == (at(6), at(7))


def test_two_jobs_on_one_machine_with_different_packages_make_no_events(db):
    histories = {"m": levels(6)}
    for night in range(6):
        upload(night, night_records(night, histories, H100, torch(OLD)), job=0)
        with_triton = {**torch(OLD), "triton": {"version": "3.5.0"}}
        other = upload(night, [{**r, "model": {**r["model"], "name": "k"}} for r in
                               night_records(night, histories, H100, with_triton)], job=1)
        Run.objects.filter(upload_id=other.upload.pk).update(name="kernels")
    environment_changes.record_changes(Run.objects.order_by("timestamp"),
                                       DetectionSettings.load().branches_for)
    assert not EnvironmentChange.objects.exists()


def test_a_run_that_arrives_late_moves_the_event_and_a_rebuild_agrees(db):
    quiet = {"m": levels(8)}
    store_nights([0, 1, 2, 4, 5], quiet, bump_at=3)
    [change] = EnvironmentChange.objects.all()
    assert (change.before_run.timestamp, change.at) == (at(2), at(4))
    store_nights([3], quiet, bump_at=3)  # night 3's run, uploaded last, already had it
    [change] = EnvironmentChange.objects.all()
    assert (change.before_run.timestamp, change.at) == (at(2), at(3))
    incremental = list(EnvironmentChange.objects.values_list("before_run", "after_run",
                                                             "summary"))
    assert environment_changes.rebuild("pytorch/ao", ["main"]) == 1
    assert list(EnvironmentChange.objects.values_list("before_run", "after_run",
                                                      "summary")) == incremental


def test_other_branches_make_no_events(db):
    for night, version in ((0, OLD), (1, NEW)):
        stored = upload(night, night_records(night, {"m": [[1.0], [1.0]]}, H100,
                                             torch(version)), branch="pr-branch")
        detect_runs(Run.objects.filter(upload_id=stored.upload.pk))
    assert not EnvironmentChange.objects.exists()


@pytest.fixture
def stepped(db):
    """On H100 torch is bumped at night 25, and "bumped" steps 30 % there; "committed"
    steps 30 % at night 15 (a commit's change); on A100 "a100" steps at night 25 with no
    environment change of its own."""
    h100 = {"bumped": levels(40, step_at=25, step=0.3),
            "committed": levels(40, step_at=15, step=0.3, seed=4),
            "steady": levels(40, seed=1)}
    store_nights(range(40), h100, arch=H100, bump_at=25, detect=False)
    store_nights(range(40), {"a100": levels(40, step_at=25, step=0.3, seed=7)}, arch=A100,
                 job=1, detect=False)
    detect_repo("pytorch/ao")
    return {r.series.model: r for r in Regression.objects.select_related(
        "series", "environment_change") if r.detector == "changepoint"}


def test_a_change_point_within_an_environment_change_is_labelled_with_it(stepped):
    assert set(stepped) == {"bumped", "committed", "a100"}
    bumped = stepped["bumped"]
    assert bumped.last_good_at < at(25) <= bumped.first_bad_at  # its likelihood range
    assert bumped.environment_change.at == at(25)
    assert bumped.environment_text == f"environment: torch {OLD} -> {NEW}; cuda unchanged"
    # a commit's change, and the same night's change on a device whose environment held
    assert stepped["committed"].environment_change is None
    assert stepped["a100"].environment_change is None


def test_environment_regressions_are_told_only_when_the_settings_say_so(stepped, webhook):
    NotificationTarget.objects.create(name="hook", kind="webhook", url=webhook.url)
    bumped = stepped["bumped"]
    assert notify.notify_regressions([bumped]) == 0 and not webhook.received
    settings = DetectionSettings.load()
    settings.notify_environment_changes = True
    settings.save()
    assert notify.notify_regressions([bumped]) == 1
    [(_, payload)] = webhook.received
    members = {m["model"]: m for m in payload["items"][0]["members"]}  # one night's group
    assert members["bumped"]["environment_change"] == f"torch {OLD} -> {NEW}; cuda unchanged"
    assert members["a100"]["environment_change"] is None


def test_an_environment_regression_is_not_sent_to_an_ab_try_job(stepped, monkeypatch):
    """Both of its commits measured today share one environment: the try job would call a
    real change "not reproduced" and mark it a false positive."""
    queued = []
    monkeypatch.setattr(confirmation, "_starter", lambda r: queued.append(r.pk) or "")
    bumped, committed = stepped["bumped"], stepped["committed"]
    assert confirmation.request([bumped, committed]) == [committed]
    bumped.refresh_from_db()
    assert queued == [committed.pk]
    assert (bumped.confirmation, bumped.state) == (Regression.Confirmation.NOT_CONFIRMABLE,
                                                   Regression.State.OPEN)
    assert "environment" in bumped.confirmation_note


def test_the_api_lists_environment_changes_and_runs_by_fingerprint(db, client):
    quiet = {"m": levels(6)}
    store_nights(range(6), quiet, arch=H100, bump_at=3)
    store_nights(range(6), quiet, arch=A100, job=1, bump_at=5)
    answer = client.get("/api/v3/environment-changes?repo=pytorch/ao").json()
    assert [(c["arch"], c["summary"]) for c in answer["results"]] == [
        (A100, f"torch {OLD} -> {NEW}; cuda unchanged"),  # newest first
        (H100, f"torch {OLD} -> {NEW}; cuda unchanged")]
    [h100] = client.get(f"/api/v3/environment-changes?arch={H100}").json()["results"]
    assert h100["changes"] == [{"key": "torch", "before": OLD, "after": NEW}]
    after = Run.objects.get(pk=h100["after_run"])
    runs = client.get(f"/api/v3/runs?environment_hash={after.environment_hash}"
                      f"&arch={H100}").json()
    assert sorted(r["timestamp"][:10] for r in runs["results"]) == sorted(
        at(night).isoformat()[:10] for night in (3, 4, 5))
    assert runs["results"][0]["environment"]["torch"] == NEW
    assert client.get("/api/v3/environment-changes?since=yesterday").status_code == 400


def test_detection_over_the_history_again_keeps_the_changes_and_labels(stepped):
    bumped = stepped["bumped"]
    changes = set(EnvironmentChange.objects.values_list("pk", flat=True))
    detect_repo("pytorch/ao")  # e.g. after a settings change
    assert set(EnvironmentChange.objects.values_list("pk", flat=True)) == changes
    bumped.refresh_from_db()
    assert bumped.environment_change_id in changes
    # Stored before environments were known (an upgrade): recorded and labelled again.
    EnvironmentChange.objects.all().delete()
    bumped.refresh_from_db()
    assert bumped.environment_change_id is None
    detect_repo("pytorch/ao")
    bumped.refresh_from_db()
    assert bumped.environment_text == f"environment: torch {OLD} -> {NEW}; cuda unchanged"
    assert Regression.objects.filter(environment_change__isnull=False).count() == 1
