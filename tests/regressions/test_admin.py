"""Settings and triage in the admin."""

import pytest
from django.contrib.auth.models import User

from benchsite.comparison.models import MetricDirection
from benchsite.regressions.detection import detect_series
from benchsite.regressions.models import DetectionSettings, Regression
from tests.regressions.factory import levels, store_history

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("admin", password="pw"))
    return client


def test_settings_are_one_row_with_the_hud_thresholds_made_when_first_needed(admin_client):
    DetectionSettings.objects.all().delete()  # e.g. a flushed database
    settings = DetectionSettings.load()
    assert settings.pk == 1 and DetectionSettings.load().pk == 1
    assert settings.tolerance("Fwd Speedup (x)", "micro-benchmark api") == 0.05
    assert settings.tolerance("compilation_latency", "TorchInductor") == 0.15
    assert settings.tolerance("Allocated Memory (MB)", "x") == 0.20
    assert settings.tolerance("widgets", "x") == settings.default_tolerance
    settings.thresholds.create(position=0, metric="*speedup*", benchmark="torchao*",
                               tolerance=0.1, statistic="min")
    settings = DetectionSettings.load()
    assert settings.hud_params("Fwd Speedup (x)", "torchao micro").tolerance == 0.1
    assert settings.hud_params("Fwd Speedup (x)", "torchao micro").statistic == "min"
    assert settings.hud_params("speedup", "TorchInductor").tolerance == 0.05

    answer = admin_client.get("/admin/regressions/detectionsettings/")
    assert answer.status_code == 302 and answer["Location"].endswith("/1/change/")
    form = admin_client.get(answer["Location"])
    assert form.status_code == 200 and "min_magnitude" in form.content.decode()


def test_the_admin_lists_regressions_and_its_actions_record_who(admin_client):
    series = store_history({"m": levels(40, step_at=25, step=0.3)})["m"]
    detect_series([series.pk], "main")
    ids = list(Regression.objects.values_list("pk", flat=True))
    listing = admin_client.get("/admin/regressions/regression/?state__exact=open")
    assert listing.status_code == 200
    admin_client.post("/admin/regressions/regression/",
                      {"action": "mark_expected", "_selected_action": ids})
    assert set(Regression.objects.values_list("state", flat=True)) == {"expected"}
    event = Regression.objects.first().events.last()
    assert (event.user.username, event.to_state) == ("admin", "expected")
    page = admin_client.get(f"/admin/regressions/regression/{ids[0]}/change/")
    assert page.status_code == 200 and "changed in the admin" in page.content.decode()
    for model in ("comparison/metricdirection", "regressions/notificationtarget",
                  "regressions/silencealert"):
        assert admin_client.get(f"/admin/{model}/").status_code == 200


def test_the_admin_shows_which_rule_judges_a_metric(admin_client):
    series = store_history({"m": levels(40, step_at=25, step=0.3)})["m"]
    [regression, *_] = detect_series([series.pk], "main")
    page = admin_client.get(f"/admin/regressions/regression/{regression.pk}/change/")
    assert "table: micro-benchmark api / Quantized Fwd Time (ms)" in page.content.decode()
    MetricDirection.objects.create(metric="batch_size", direction="lower")
    MetricDirection.objects.create(metric="p50_latency", direction="higher")
    listing = admin_client.get("/admin/comparison/metricdirection/").content.decode()
    assert "unknown (unknown: no table entry" in listing
    assert "lower (inferred: &#x27;latency&#x27; in &#x27;p50_latency&#x27;)" in listing
