"""The recent history of many series, read with one query.

On PostgreSQL a LATERAL join walks the (series, timestamp) index backwards for each series
and each series comes back as one row of arrays, in binary; other databases (SQLite has
neither LATERAL nor arrays) use a window function through the ORM. The ORM path works on
PostgreSQL too but is 4-6x slower there: 10-14 s against 2.2-3.1 s for the last 200 points
of 2,000 series of 365 (measured with a row a point, before the arrays).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import psycopg
from django.db import connection
from django.db.models import F, Window
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import RowNumber

from benchsite.comparison import points
from benchsite.results.models import Result, Run, repetitions, stored_times

# One row a series: its points newest first, as arrays (a row a point costs the client
# more than the query: 730,000 tuples for 2,000 series of 365), the repetitions of all its
# points in one array with each point's count (a point without repetitions is its value).
LATEST_SQL = f"""
SELECT s.id, r.timestamps, r.run_ids, r.counts, r.repetitions, r.unit
FROM unnest(%s::bigint[]) AS s(id)
CROSS JOIN LATERAL (
    SELECT array_agg(l.timestamp) FILTER (WHERE u.k = 1) AS timestamps,
           array_agg(l.run_id) FILTER (WHERE u.k = 1) AS run_ids,
           array_agg(cardinality(l.repetitions)) FILTER (WHERE u.k = 1) AS counts,
           array_agg(u.v) AS repetitions,
           (array_agg(l.unit) FILTER (WHERE u.k = 1))[1] AS unit
    FROM (
        SELECT res.timestamp, res.run_id, res.extra_info ->> 'unit' AS unit,
               CASE WHEN cardinality(res.values) > 0 THEN res.values
                    ELSE ARRAY[res.value] END AS repetitions
        FROM {Result._meta.db_table} res {{join}}
        WHERE res.series_id = s.id AND res.value IS NOT NULL
          AND res.timestamp BETWEEN %s AND %s AND {{branch}}
        ORDER BY res.timestamp DESC LIMIT %s
    ) AS l CROSS JOIN LATERAL unnest(l.repetitions) WITH ORDINALITY AS u(v, k)
) AS r
WHERE r.timestamps IS NOT NULL
"""
# The point's run on one of the branches, looked up for each point, for a few series...
BY_JOIN = {"join": f"JOIN {Run._meta.db_table} run ON run.id = res.run_id",
           "branch": "run.head_branch = ANY(%s)"}
# ... and for many, in a hash of the branches' runs made once a query (IS TRUE keeps the
# IN a filter, which PostgreSQL hashes, instead of a join). Looked up each time, the same
# runs were probed for every series: on the plain table the planner caches those probes
# (Memoize), on the monthly partitions it never did (10.0M results, 500 series of 60
# points: 145 ms against 110 ms hashed, the plain table's join 100 ms; 50 of 120: 55
# against 35 ms). A hash costs ~8 ms at 3,756 runs: one series' join takes 2-3 ms.
BY_HASH = {"join": "", "branch": f"(res.run_id IN (SELECT id FROM {Run._meta.db_table} "
                                 "WHERE head_branch = ANY(%s))) IS TRUE"}
HASHED_FROM = 20  # series
# Parts read at once while detection works on one: at 10.0M results a night's detection
# waited for one reader (200 points of 29,621 series, about 39 s of reading against 22 of
# detecting); the database's other core reads the next part meanwhile.
READERS = 2
# No history reaches past this.
FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)


@dataclass
class History:
    """A series' latest points, oldest first (results without numbers left out)."""

    timestamps: list[datetime]
    run_ids: list[int]
    values: np.ndarray  # one per point: trimmed mean of its repetitions
    noise_floor: float  # relative noise the repetitions alone imply
    unit: str  # metric.extra_info.unit of the latest point

    def __len__(self) -> int:
        return len(self.timestamps)


def recent(series_ids: Iterable[int], points_wanted: int, branches: Iterable[str],
           until: datetime | None = None) -> dict[int, History]:
    """The last `points_wanted` results of each series on these branches (one history:
    a repo's default branches), up to `until` (inclusive; default: the newest), by series
    id. Other branches' results are never points of it."""
    ids = sorted(set(series_ids))
    branches = sorted(set(branches))
    if not ids or not branches:
        return {}
    return _histories(_newest_first(ids, points_wanted, branches, until or FAR_FUTURE))


def recent_in_parts(parts: list[list[int]], points_wanted: int,
                    branches: Iterable[str]) -> Iterator[dict[int, History]]:
    """`recent` of each part of many series, in order. On PostgreSQL outside a transaction
    the next parts are read by READERS other threads, each on a connection of its own,
    while the caller works on this one: the server's half of a read (most of it) overlaps
    the caller's detection. Inside a transaction a second connection might not see what
    this one wrote, so the parts are read here, one after the other."""
    branches = list(branches)

    def read(part: list[int]) -> dict[int, History]:
        return recent(part, points_wanted, branches)

    def read_apart(part: list[int]) -> dict[int, History]:
        """`read` in a reader thread, which closes its connection after each part (a new
        one costs milliseconds a part of seconds)."""
        try:
            return read(part)
        finally:
            connection.close()  # (`connection` resolves to this thread's)

    if len(parts) < 2 or connection.vendor != "postgresql" or connection.in_atomic_block:
        yield from map(read, parts)
        return
    threads = min(READERS, len(parts))
    with ThreadPoolExecutor(threads, thread_name_prefix="history") as pool:
        pending = deque(pool.submit(read_apart, part) for part in parts[:threads])
        try:
            for part in parts[threads:]:
                ready = pending.popleft().result()
                pending.append(pool.submit(read_apart, part))
                yield ready
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def _newest_first(ids: list[int], points_wanted: int, branches: list[str],
                  until: datetime) -> Iterable[tuple]:
    """(series id, timestamps, run ids, repetition counts, repetitions, unit of the newest)
    of each series with points, newest first."""
    if connection.vendor == "postgresql":  # 4-6x faster than the ORM path (see above)
        first, last = stored_times()
        if first is None:
            return []
        sql = LATEST_SQL.format(**BY_HASH if len(ids) >= HASHED_FROM else BY_JOIN)
        connection.ensure_connection()
        with psycopg.Cursor(connection.connection) as cursor:
            # Between the first and the last result, as constants: on the monthly partitions
            # (results.partitions) the planner leaves DEFAULT out, so it reads the months
            # newest first and stops at each series' oldest point wanted; without the
            # bounds it merged all months' index scans, each begun for every series.
            cursor.execute(sql, [ids, first, min(until, last), branches, points_wanted],
                           binary=True)
            return cursor.fetchall()
    rows = (
        Result.objects.filter(series_id__in=ids, value__isnull=False, timestamp__lte=until,
                              run__head_branch__in=branches)
        .annotate(age=Window(RowNumber(), partition_by=[F("series_id")],
                             order_by=[F("timestamp").desc(), F("id").desc()]),
                  unit=KeyTextTransform("unit", "extra_info"))
        .filter(age__lte=points_wanted)
        .order_by("series_id", "-timestamp", "-id")
        .values_list("series_id", "timestamp", "run_id", "value", "values", "unit")
    )
    grouped: dict[int, list[tuple]] = {}
    for row in rows:
        grouped.setdefault(row[0], []).append(row)
    found = []
    for series_id, newest in grouped.items():
        points = [repetitions(values, value) for _, _, _, value, values, _ in newest]
        found.append((series_id, [row[1] for row in newest], [row[2] for row in newest],
                      [len(reps) for reps in points],
                      [rep for reps in points for rep in reps], newest[0][5]))
    return found


def _histories(newest_first: list[tuple]) -> dict[int, History]:
    """Histories by series id from rows of `_newest_first`: all their points summarised
    at once, oldest first."""
    if not newest_first:
        return {}
    lengths = np.array([len(row[3]) for row in newest_first])
    counts = np.fromiter(itertools.chain.from_iterable(row[3] for row in newest_first),
                         dtype=int, count=lengths.sum())
    matrix = np.full((len(counts), max(counts.max(), 1)), np.nan)
    matrix[np.arange(matrix.shape[1]) < counts[:, None]] = list(
        itertools.chain.from_iterable(row[4] for row in newest_first))
    # Reversed whole: each series' points oldest first, the series in reverse order.
    values, floors = points.summarize_segments(matrix[::-1], lengths[::-1])
    ends = np.cumsum(lengths[::-1])
    histories = {}
    for (series_id, timestamps, run_ids, _, _, unit), end, length, floor in zip(
            reversed(newest_first), ends, lengths[::-1], floors, strict=True):
        histories[series_id] = History(
            timestamps=timestamps[::-1], run_ids=run_ids[::-1],
            values=values[end - length : end], noise_floor=float(floor), unit=str(unit or ""))
    return {series_id: histories[series_id] for series_id, *_ in newest_first}
