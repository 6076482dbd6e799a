"""On PostgreSQL, results_result becomes a table partitioned by month of `timestamp`
(benchsite.results.partitions says why); SQLite keeps its plain table.

The table is rebuilt under the same name: a partition for each month its rows fall in and a
DEFAULT one, the rows copied with their ids, the id sequence carried on, the old table
dropped. The primary key becomes (id, timestamp), as PostgreSQL requires the partition key
in it (Django still sees `id`); the other indexes are made again with their names. It
needs room for a second copy of the table while it runs, and blocks results until done.
The reverse rebuilds a plain table the same way.
"""

from django.db import migrations

from benchsite.results.partitions import DEFAULT, month_bounds, partition_name

TABLE = "results_result"


def partition(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        indexes = _index_definitions(cursor)
        new = f"{TABLE}_partitioned"
        cursor.execute(f"CREATE TABLE {new} (LIKE {TABLE} INCLUDING DEFAULTS INCLUDING "
                       f'IDENTITY) PARTITION BY RANGE ("timestamp")')
        cursor.execute(f"CREATE TABLE {DEFAULT} PARTITION OF {new} DEFAULT")
        cursor.execute(f"SELECT DISTINCT date_trunc('month', \"timestamp\" AT TIME ZONE 'UTC')"
                       f"::date FROM {TABLE}")
        for (month,) in sorted(cursor.fetchall()):
            start, end = month_bounds(month)
            cursor.execute(f"CREATE TABLE {partition_name(month)} PARTITION OF {new} "
                           f"FOR VALUES FROM ({start}) TO ({end})")
        _replace(cursor, new)
        cursor.execute(f'ALTER TABLE {TABLE} ADD CONSTRAINT {TABLE}_pkey '
                       f'PRIMARY KEY (id, "timestamp")')
        for definition in indexes:
            cursor.execute(definition)
        cursor.execute(f"ANALYZE {TABLE}")  # autovacuum never analyses a partitioned parent


def unpartition(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        # A partitioned index is defined ON ONLY its table; a plain table's is not.
        indexes = [definition.replace(" ON ONLY ", " ON ", 1)
                   for definition in _index_definitions(cursor)]
        new = f"{TABLE}_plain"
        cursor.execute(f"CREATE TABLE {new} (LIKE {TABLE} INCLUDING DEFAULTS INCLUDING "
                       "IDENTITY)")
        _replace(cursor, new)
        cursor.execute(f"ALTER TABLE {TABLE} ADD CONSTRAINT {TABLE}_pkey PRIMARY KEY (id)")
        for definition in indexes:
            cursor.execute(definition)
        cursor.execute(f"ANALYZE {TABLE}")


def _index_definitions(cursor) -> list[str]:
    """The CREATE INDEX statements of the table's indexes but its primary key."""
    cursor.execute("SELECT pg_get_indexdef(indexrelid) FROM pg_index "
                   "WHERE indrelid = %s::regclass AND NOT indisprimary ORDER BY indexrelid",
                   [TABLE])
    return [definition for (definition,) in cursor.fetchall()]


def _replace(cursor, new: str) -> None:
    """Fill `new` (LIKE the table, so its columns are in the same order) with the table's
    rows, carry the id sequence on, drop the table and give `new` its name."""
    cursor.execute(f"INSERT INTO {new} SELECT * FROM {TABLE}")
    cursor.execute(f"SELECT last_value, is_called FROM {_sequence(cursor, TABLE)}")
    last_value, is_called = cursor.fetchone()
    sequence = _sequence(cursor, new)
    cursor.execute("SELECT setval(%s, %s, %s)", [sequence, last_value, is_called])
    cursor.execute(f"DROP TABLE {TABLE}")
    cursor.execute(f"ALTER TABLE {new} RENAME TO {TABLE}")
    cursor.execute(f"ALTER SEQUENCE {sequence} RENAME TO {TABLE}_id_seq")


def _sequence(cursor, table: str) -> str:
    cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [table])
    return cursor.fetchone()[0]


class Migration(migrations.Migration):
    dependencies = [("results", "0010_run_last_timestamp")]

    operations = [migrations.RunPython(partition, unpartition)]
