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
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from benchsite.results.models import Result

TABLE = Result._meta.db_table
DEFAULT = f"{TABLE}_default"

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


def month_bounds(month: date) -> tuple[str, str]:
    """The partition's range as SQL literals: from its first instant to the next month's."""
    following = date(month.year + month.month // 12, month.month % 12 + 1, 1)
    return f"'{month.isoformat()} 00:00:00+00'", f"'{following.isoformat()} 00:00:00+00'"


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
