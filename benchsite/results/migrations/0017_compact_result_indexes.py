"""Smaller indexes of the results table, which were half of its bytes (145 of 300 a result
at 1M results):

- a run's results are found by run alone (7 bytes a result, its key stored once for its
  thousands of results) instead of (run, series) (32);
- on PostgreSQL the primary key becomes ("timestamp", id), which is the query API's order,
  so the separate ("timestamp", id) index goes (the partition key must be in the primary
  key, and id first served no query: 36 bytes a result);
- on PostgreSQL an upload's rows are found by a BRIN index under the B-tree's name (8
  bytes a result, now a few kilobytes in all): an upload's rows are written together, so
  each 32 pages hold few uploads; and an id's row (the admin's page) by a BRIN index on
  id, which grows with the rows.

Django's state keeps ("timestamp", id) and the upload's index: SQLite has them as before,
and on PostgreSQL a later RemoveIndex drops only if it exists. It builds each index anew:
the results are locked against writes while it runs (about a minute at 10M results).
"""

from django.db import migrations, models

TABLE = "results_result"
TIME_INDEX = "results_res_timesta_e73c2f_idx"
UPLOAD_INDEX = "results_result_upload_id_e55d19de"
ID_INDEX = "results_result_id_brin"
# a summary of each 32 pages (about 2,000 results), made once they are filled
BRIN = "USING brin ({}) WITH (pages_per_range = 32, autosummarize = on)"

FORWARDS = [
    f"ALTER TABLE {TABLE} DROP CONSTRAINT {TABLE}_pkey",
    f'ALTER TABLE {TABLE} ADD CONSTRAINT {TABLE}_pkey PRIMARY KEY ("timestamp", id)',
    f"DROP INDEX {TIME_INDEX}",
    f"DROP INDEX {UPLOAD_INDEX}",
    f"CREATE INDEX {UPLOAD_INDEX} ON {TABLE} {BRIN.format('upload_id')}",
    f"CREATE INDEX {ID_INDEX} ON {TABLE} {BRIN.format('id')}",
]
BACKWARDS = [
    f"DROP INDEX {ID_INDEX}",
    f"DROP INDEX {UPLOAD_INDEX}",
    f"CREATE INDEX {UPLOAD_INDEX} ON {TABLE} (upload_id)",
    f'CREATE INDEX {TIME_INDEX} ON {TABLE} ("timestamp", id)',
    f"ALTER TABLE {TABLE} DROP CONSTRAINT {TABLE}_pkey",
    f'ALTER TABLE {TABLE} ADD CONSTRAINT {TABLE}_pkey PRIMARY KEY (id, "timestamp")',
]


def _run(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            for statement in statements:
                schema_editor.execute(statement)
    return run


class Migration(migrations.Migration):

    dependencies = [
        ('results', '0016_series_deletions'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='result',
            name='results_res_run_id_430b47_idx',
        ),
        migrations.AddIndex(
            model_name='result',
            index=models.Index(fields=['run'], name='results_res_run_id_5a061e_idx'),
        ),
        migrations.RunPython(_run(FORWARDS), _run(BACKWARDS)),
    ]
