"""The change point's significance level goes from 1e-5 to 5e-6, with its noise estimated
from 120 points instead of 60 (changepoint.Params): a settings row still at the old default
moves with it, since the two were chosen together (perf/detectors.py); a level an admin
chose otherwise is kept."""

from django.db import migrations, models

OLD, NEW = 1e-5, 5e-6


def _move(old: float, new: float):
    def move(apps, schema_editor):
        settings = apps.get_model("regressions", "DetectionSettings")
        settings.objects.filter(significance=old).update(significance=new)
    return move


class Migration(migrations.Migration):

    dependencies = [
        ('regressions', '0008_compare_fdr'),
    ]

    operations = [
        migrations.AlterField(
            model_name='detectionsettings',
            name='significance',
            field=models.FloatField(default=5e-06, help_text='change point: two-sided significance level of the test'),
        ),
        migrations.RunPython(_move(OLD, NEW), _move(NEW, OLD)),
    ]
