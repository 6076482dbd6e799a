"""The hourly stopped-reporting check, for django-celery-beat."""

from django.db import migrations

TASK = "benchsite.regressions.tasks.stopped_reporting"


def create(apps, schema_editor):
    interval_model = apps.get_model("django_celery_beat", "IntervalSchedule")
    task_model = apps.get_model("django_celery_beat", "PeriodicTask")
    every_hour, _ = interval_model.objects.get_or_create(every=1, period="hours")
    task_model.objects.get_or_create(
        name="regressions: stopped reporting",
        defaults={"task": TASK, "interval": every_hour, "queue": "cpu"})


def remove(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(task=TASK).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("regressions", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(create, remove)]
