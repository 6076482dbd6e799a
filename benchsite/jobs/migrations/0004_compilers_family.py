"""The benchmark family "experiments" is now "compilers" (runner.families)."""

from django.db import migrations


def rename(old: str, new: str):
    def run(apps, schema_editor):
        apps.get_model("jobs", "Job").objects.filter(family=old).update(family=new)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0003_job_config"),
    ]
    operations = [
        migrations.RunPython(rename("experiments", "compilers"),
                             rename("compilers", "experiments")),
    ]
