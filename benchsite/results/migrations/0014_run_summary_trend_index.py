# The trends index read alone: (repo, benchmark, metric, branch, arch, timestamp) with the aggregated columns included.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('results', '0013_run_benchmark'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='runsummary',
            name='results_run_repo_26da54_idx',
        ),
        migrations.AddIndex(
            model_name='runsummary',
            index=models.Index(fields=['repo', 'benchmark', 'metric', 'branch', 'arch', 'timestamp'], include=('run', 'mode', 'dtype', 'backend', 'suite', 'compile_mode', 'log_sum', 'log_count', 'pass_count', 'string_count'), name='run_summary_trend'),
        ),
    ]
