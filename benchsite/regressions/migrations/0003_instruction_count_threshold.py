"""The 1 % instruction-count threshold for settings made before it was a default (a new
database gets it from DetectionSettings.load)."""

from django.db import migrations

PATTERN, TOLERANCE, POSITION = "*instruction*", 0.01, 70


def add(apps, schema_editor):
    settings_model = apps.get_model("regressions", "DetectionSettings")
    threshold_model = apps.get_model("regressions", "MetricThreshold")
    for row in settings_model.objects.all():
        if not threshold_model.objects.filter(settings=row, metric=PATTERN).exists():
            threshold_model.objects.create(settings=row, position=POSITION, metric=PATTERN,
                                           tolerance=TOLERANCE)


def remove(apps, schema_editor):
    apps.get_model("regressions", "MetricThreshold").objects.filter(
        metric=PATTERN, tolerance=TOLERANCE, position=POSITION).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("regressions", "0002_stopped_reporting_schedule"),
    ]
    operations = [migrations.RunPython(add, remove)]
