"""Schedules submit jobs through the catalog's task now (it resolves config names)."""

from django.db import migrations

OLD, NEW = "benchsite.jobs.tasks.submit_spec", "benchsite.catalog.tasks.submit_scheduled"


def rename_task(old: str, new: str):
    def run(apps, schema_editor):
        apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(task=old).update(
            task=new)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ("catalog", "0003_recipe_kind_pattern"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        migrations.RunPython(rename_task(OLD, NEW), rename_task(NEW, OLD)),
    ]
