"""The comparison app takes over two models the regressions app made, with their tables
(`regressions_metricdirection`, `regressions_seriesbaseline`): state only, the database is
not touched. `regressions.0010_comparison_models` drops them from the regressions app's
state after this. Their content types move too, so permissions granted on them stay."""

import django.db.models.deletion
from django.db import migrations, models

MODELS = ("metricdirection", "seriesbaseline")


def _move_content_types(source: str, target: str):
    def move(apps, schema_editor):
        content_type = apps.get_model("contenttypes", "ContentType")
        for model in MODELS:
            if not content_type.objects.filter(app_label=target, model=model).exists():
                content_type.objects.filter(app_label=source, model=model).update(
                    app_label=target)
    return move


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('regressions', '0009_changepoint_significance'),
        ('results', '0003_series_baseline'),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='MetricDirection',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('metric', models.CharField(help_text='the metric name, exactly', max_length=255)),
                        ('benchmark', models.CharField(blank=True, help_text='only for this benchmark; blank: every benchmark', max_length=255)),
                        ('direction', models.CharField(choices=[('higher', 'higher is better'), ('lower', 'lower is better')], max_length=10)),
                    ],
                    options={
                        'db_table': 'regressions_metricdirection',
                        'constraints': [models.UniqueConstraint(fields=('metric', 'benchmark'), name='one_direction_per_metric')],
                    },
                ),
                migrations.CreateModel(
                    name='SeriesBaseline',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('level', models.FloatField(null=True)),
                        ('noise', models.FloatField(null=True)),
                        ('freedom', models.FloatField()),
                        ('points', models.PositiveIntegerField()),
                        ('since', models.PositiveIntegerField()),
                        ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='results.run')),
                        ('series', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='results.series')),
                    ],
                    options={
                        'db_table': 'regressions_seriesbaseline',
                        'constraints': [models.UniqueConstraint(fields=('run', 'series'), name='one_baseline_per_run_and_series')],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(_move_content_types("regressions", "comparison"),
                             _move_content_types("comparison", "regressions")),
    ]
