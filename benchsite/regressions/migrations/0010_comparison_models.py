"""`MetricDirection` and `SeriesBaseline` belong to the comparison app now
(`comparison.0001_initial` takes them over with their tables): state only, the database is
not touched."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('regressions', '0009_changepoint_significance'),
        ('comparison', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name='MetricDirection'),
                migrations.DeleteModel(name='SeriesBaseline'),
            ],
            database_operations=[],
        ),
    ]
