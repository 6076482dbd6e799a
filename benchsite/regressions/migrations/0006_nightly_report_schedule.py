"""The nightly report, daily at 06:00 UTC (yesterday's report), for django-celery-beat."""

from django.db import migrations

TASK = "benchsite.regressions.tasks.nightly_report"


def create(apps, schema_editor):
    crontab_model = apps.get_model("django_celery_beat", "CrontabSchedule")
    task_model = apps.get_model("django_celery_beat", "PeriodicTask")
    six_utc, _ = crontab_model.objects.get_or_create(
        minute="0", hour="6", day_of_week="*", day_of_month="*", month_of_year="*",
        timezone="UTC")
    task_model.objects.get_or_create(
        name="regressions: nightly report",
        defaults={"task": TASK, "crontab": six_utc, "queue": "cpu"})


def remove(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(task=TASK).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("regressions", "0005_branches_evidence_groups_reports"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(create, remove)]
