"""Monthly partitions of the results table on PostgreSQL (SQLite keeps one plain table).

Migration 0011 made `results_result` a table partitioned by range of `timestamp`: one
partition a month, and a DEFAULT one for rows of a month that has none yet. Toward 100M
results: uploads and recent pages touch the small indexes of recent months rather than one
index of everything, a query bounded in time reads only its months, and an old month can be
detached or dropped whole.

A month's partition is made when its data arrives: ingestion calls `ensure_months` once
the upload's transaction has committed (at most one catalog query per upload; months known
to exist are remembered in this process). Rows written into a month without a partition
land in DEFAULT; making that month moves them into it (`create_month`). Making a month
locks the parent against other makers (SHARE UPDATE EXCLUSIVE: reads and writes of other
months go on) and the DEFAULT partition (ACCESS EXCLUSIVE: queries not bounded in time
wait) until its transaction commits, hence after the upload's own transaction: a month is
made in a short transaction of its own, and the upload's results wait in DEFAULT till then
(ingestion reads the results as it writes them, so it cannot know their months before).

A month is written in upload order: a night's results of every series together, so a
series' points of a month lie one on each of ~30 pages. Once the month has settled
(`order_months`, nightly from celery beat) its partition is rewritten in the order of its
`(series, timestamp)` index (`CLUSTER`): a series' month of points then lies on a page or
two, and a long history (the explorer's year, detection's 200 points, a regression's chart)
reads a tenth of the pages. TimescaleDB's reorder policy does the same to its old chunks.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.db import OperationalError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg.errors import LockNotAvailable

from benchsite.results.models import Result

TABLE = Result._meta.db_table
DEFAULT = f"{TABLE}_default"

# A month is ordered once it ended this long ago (uploads of its last nights have come), and
# again when the rows written since leave its series less than this correlated with their
# place in the table (`pg_stats.correlation`, 1.0 once ordered; a month written night after
# night reads about 0.06).
SETTLED = timedelta(days=2)
ORDERED = 0.9

# (database alias, month) of partitions known to exist, added when the transaction that
# saw or made them commits. A partition dropped by hand stays "known": its rows go to
# DEFAULT until the process restarts, and are moved out when the month is made again.
KNOWN: set[tuple[str, date]] = set()


def month_of(moment: datetime) -> date:
    """The first day of `moment`'s month (UTC)."""
    moment = moment.astimezone(UTC)
    return date(moment.year, moment.month, 1)


def partition_name(month: date) -> str:
    return f"{TABLE}_p{month:%Y_%m}"


def next_month(month: date) -> date:
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def month_bounds(month: date) -> tuple[str, str]:
    """The partition's range as SQL literals: from its first instant to the next month's."""
    return (f"'{month.isoformat()} 00:00:00+00'",
            f"'{next_month(month).isoformat()} 00:00:00+00'")


def ensure_months(connection: BaseDatabaseWrapper, timestamps: Iterable[int]) -> None:
    """Make the partitions of the months of these Unix timestamps that do not exist yet."""
    if connection.vendor != "postgresql":
        return
    alias = connection.alias
    months = {month_of(datetime.fromtimestamp(moment, UTC)) for moment in set(timestamps)}
    months = {month for month in months if (alias, month) not in KNOWN}
    if not months:
        return
    existing = _existing_months(connection, months)
    if existing is None:  # not partitioned (migration 0011 reversed)
        return
    for month in sorted(months - existing):
        create_month(connection, month)
    transaction.on_commit(lambda: KNOWN.update((alias, month) for month in months),
                          using=alias)


def create_month(connection: BaseDatabaseWrapper, month: date) -> bool:
    """Make `month`'s partition, moving its rows out of DEFAULT; False if it exists.

    The new table is filled, then attached: attaching takes a weaker lock on the parent
    than `CREATE TABLE ... PARTITION OF` (which would stop every read of results)."""
    name = partition_name(month)
    start, end = month_bounds(month)
    columns = ", ".join(connection.ops.quote_name(field.column)
                        for field in Result._meta.concrete_fields)
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        # Makers queue here (the lock conflicts with itself), then see the first one's table.
        cursor.execute(f"LOCK TABLE ONLY {TABLE} IN SHARE UPDATE EXCLUSIVE MODE")
        if _existing_months(connection, {month}):
            return False
        # No row may enter DEFAULT between the move and the attach, which checks it.
        cursor.execute(f"LOCK TABLE {DEFAULT} IN ACCESS EXCLUSIVE MODE")
        cursor.execute(f"CREATE TABLE {name} (LIKE {TABLE})")
        cursor.execute(
            f'WITH moved AS (DELETE FROM {DEFAULT} WHERE "timestamp" >= {start} '
            f'AND "timestamp" < {end} RETURNING {columns}) '
            f"INSERT INTO {name} ({columns}) SELECT {columns} FROM moved")
        cursor.execute(f"ALTER TABLE {TABLE} ATTACH PARTITION {name} "
                       f"FOR VALUES FROM ({start}) TO ({end})")
    return True


def _existing_months(connection: BaseDatabaseWrapper, months: set[date]) -> set[date] | None:
    """Which of these months have a partition; None if the table is not partitioned."""
    names = {partition_name(month): month for month in months}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT parent.relkind = 'p', array(SELECT child.relname FROM pg_inherits "
            "JOIN pg_class child ON child.oid = pg_inherits.inhrelid "
            "WHERE pg_inherits.inhparent = parent.oid AND child.relname = ANY(%s)) "
            "FROM pg_class parent WHERE parent.oid = %s::regclass",
            [list(names), TABLE])
        partitioned, found = cursor.fetchone()
    return {names[name] for name in found} if partitioned else None


@dataclass(frozen=True)
class Partition:
    name: str
    bounds: str  # as PostgreSQL prints them: "FOR VALUES FROM (...) TO (...)", or "DEFAULT"
    rows: int | None  # the planner's estimate unless counted; None: never analysed
    bytes: int  # with its indexes


def partitions(connection: BaseDatabaseWrapper, count: bool = False) -> list[Partition]:
    """The results table's partitions, oldest month first and DEFAULT last; [] if it is not
    partitioned. `count` counts rows exactly (a scan of each: slow on a large table)."""
    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT child.relname, pg_get_expr(child.relpartbound, child.oid), "
            "child.reltuples, pg_total_relation_size(child.oid) FROM pg_inherits "
            "JOIN pg_class child ON child.oid = pg_inherits.inhrelid "
            "WHERE pg_inherits.inhparent = %s::regclass ORDER BY child.relname = %s, "
            "child.relname", [TABLE, DEFAULT])
        found = cursor.fetchall()
        listed = []
        for name, bounds, estimate, size in found:
            if count:
                cursor.execute(f"SELECT count(*) FROM {name}")
                rows = cursor.fetchone()[0]
            else:
                rows = None if estimate < 0 else int(estimate)
            listed.append(Partition(name, bounds, rows, size))
    return listed


@dataclass(frozen=True)
class Ordering:
    name: str
    outcome: str  # "ordered", "in order", "empty" or "busy" (the lock was not had in time)
    correlation: float | None  # of series_id with the rows' places, before; None: no rows
    rows: int  # the planner's estimate, after
    seconds: float = 0.0  # rewriting and analysing

    def describe(self) -> str:
        """One line for the command's output and the task's log."""
        if self.outcome == "empty":
            return f"{self.name}: empty"
        before = f"series order {self.correlation:.2f}"
        if self.outcome == "ordered":
            return f"{self.name}: ordered {self.rows} rows in {self.seconds:.1f} s (was {before})"
        if self.outcome == "busy":
            return (f"{self.name}: busy (its lock not had in time), left for the next night "
                    f"({before})")
        return f"{self.name}: in order ({before})"


def order_months(connection: BaseDatabaseWrapper, now: datetime | None = None,
                 lock_timeout: float = 10.0) -> list[Ordering]:
    """Rewrite each settled month's partition in its series' order where it is not (or no
    longer) in it, then analyse it; returns what was found and done, a settled month each.

    `CLUSTER` holds an ACCESS EXCLUSIVE lock on the month while it rewrites it (2.3 s for
    889,000 rows on 2 cores): reads of that month wait, other months' go on. It waits at
    most `lock_timeout` s for the lock (behind a long read of the month), then leaves that
    month "busy" for the next night rather than queue every later read behind it. Months
    in order cost one look at their statistics."""
    if connection.vendor != "postgresql":
        return []
    settled = ((now or datetime.now(UTC)) - SETTLED).date()
    done = []
    for partition in partitions(connection):
        month = _month_of_name(partition.name)
        if month is None or next_month(month) > settled:
            continue
        correlation = _series_correlation(connection, partition.name)
        if correlation is None or correlation >= ORDERED:
            done.append(Ordering(partition.name, "empty" if correlation is None else
                                 "in order", correlation, partition.rows or 0))
            continue
        started = time.perf_counter()
        try:
            with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = {int(lock_timeout * 1000)}")
                cursor.execute(f"CLUSTER {partition.name} USING "
                               f"{_series_index(connection, partition.name)}")
                cursor.execute(f"ANALYZE {partition.name}")
                cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass",
                               [partition.name])
                rows = max(int(cursor.fetchone()[0]), 0)
        except OperationalError as error:
            if not isinstance(error.__cause__, LockNotAvailable):
                raise
            done.append(Ordering(partition.name, "busy", correlation, partition.rows or 0))
            continue
        done.append(Ordering(partition.name, "ordered", correlation, rows,
                             time.perf_counter() - started))
    return done


def _month_of_name(name: str) -> date | None:
    """The month of a partition named by `partition_name`; None for DEFAULT."""
    try:
        return datetime.strptime(name.removeprefix(f"{TABLE}_p"), "%Y_%m").date()
    except ValueError:
        return None


def _series_correlation(connection: BaseDatabaseWrapper, name: str) -> float | None:
    """How closely the partition's rows lie in series order (analysing it first where it
    never was); None where it holds no rows."""
    query = ("SELECT correlation FROM pg_stats WHERE schemaname = current_schema() "
             "AND tablename = %s AND attname = 'series_id'")
    with connection.cursor() as cursor:
        cursor.execute(query, [name])
        found = cursor.fetchone()
        if found is None:
            cursor.execute(f"ANALYZE {name}")
            cursor.execute(query, [name])
            found = cursor.fetchone()
    return None if found is None else found[0]


def _series_index(connection: BaseDatabaseWrapper, name: str) -> str:
    """The partition's own index of the table's (series, timestamp) index."""
    parent = next(index.name for index in Result._meta.indexes
                  if index.fields == ["series", "timestamp"])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT child.relname FROM pg_inherits JOIN pg_class child "
            "ON child.oid = pg_inherits.inhrelid JOIN pg_index ON pg_index.indexrelid = "
            "child.oid WHERE pg_inherits.inhparent = %s::regclass "
            "AND pg_index.indrelid = %s::regclass", [parent, name])
        return cursor.fetchone()[0]
