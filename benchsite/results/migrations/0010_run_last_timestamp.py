"""Runs know their latest record timestamp (beside `timestamp`, the earliest), so that their
results are read within those bounds; existing runs get theirs from their results."""

from django.db import migrations, models


def fill(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        # One pass over the results grouped by run (a max per run would visit each run's
        # rows through the (run, series) index: every row, in random order). `timestamp`
        # too, should any run's be later than its first result: the bounds must hold.
        cursor.execute(
            "UPDATE results_run SET last_timestamp = bounds.last, timestamp = CASE WHEN "
            "bounds.first < results_run.timestamp THEN bounds.first ELSE "
            'results_run.timestamp END FROM (SELECT run_id, min("timestamp") AS first, '
            'max("timestamp") AS last FROM results_result GROUP BY run_id) AS bounds '
            "WHERE bounds.run_id = results_run.id")
        cursor.execute("UPDATE results_run SET last_timestamp = timestamp "
                       "WHERE last_timestamp IS NULL")


class Migration(migrations.Migration):

    dependencies = [
        ("results", "0009_summary_slice"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="last_timestamp",
            field=models.DateTimeField(null=True),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="run",
            name="last_timestamp",
            field=models.DateTimeField(help_text="latest record timestamp of the run"),
        ),
    ]
