# The busiest device or benchmark counted from an index: (repo, benchmark, arch).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('results', '0014_run_summary_trend_index'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='series',
            index=models.Index(fields=['repo', 'benchmark', 'arch'], name='series_busiest'),
        ),
    ]
