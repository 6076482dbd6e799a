# PostgreSQL: a counter of statements that deleted series (a sequence, which no transaction
# rolls back and no flush resets), bumped by a trigger. Ingestion's cache of series ids is
# trusted while the counter and the table's file node stay as they were
# (`ingest.store.CopyStore.cache_token`). SQLite keeps no such cache.

from django.db import migrations

FORWARDS = [
    "CREATE SEQUENCE results_series_deletions",
    "CREATE FUNCTION results_series_deleted() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN PERFORM nextval('results_series_deletions'); RETURN NULL; END $$",
    "CREATE TRIGGER results_series_deleted AFTER DELETE OR TRUNCATE ON results_series "
    "FOR EACH STATEMENT EXECUTE FUNCTION results_series_deleted()",
]
BACKWARDS = [
    "DROP TRIGGER results_series_deleted ON results_series",
    "DROP FUNCTION results_series_deleted()",
    "DROP SEQUENCE results_series_deletions",
]


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in FORWARDS:
            schema_editor.execute(statement)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in BACKWARDS:
            schema_editor.execute(statement)


class Migration(migrations.Migration):

    dependencies = [
        ('results', '0015_series_busiest_index'),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
