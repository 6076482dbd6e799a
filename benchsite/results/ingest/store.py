"""Storing a normalised batch: runs and series upserted in bulk, results inserted, run
summaries and counts updated, with a number of queries that does not grow with the batch.

One interface, `Store`, with one implementation per kind of database, chosen in one place
(`store_for`): `CopyStore` uses PostgreSQL's COPY and array parameters (several times faster
than adapting values row by row), `OrmStore` the ORM's bulk operations (SQLite). Both are
exercised by the same tests, run on each database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson
from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import F, Model, Value
from django.db.models.functions import Greatest

from benchsite.caching import ProcessCache
from benchsite.results.environment import environment_fields
from benchsite.results.ingest.normalize import Batch, ResultInfo, SeriesInfo
from benchsite.results.ingest.summaries import add_rows, batch_rows
from benchsite.results.models import Result, Run, RunBenchmark, Series, Upload

# Series ids by (database alias, identity), kept across uploads by this process. Looking ids
# up by id is several times cheaper than by identity, so cached ids are only checked to
# still exist (a flushed or restored database invalidates the whole cache). Ids are
# remembered when the transaction that saw them commits: a rolled-back upload adds nothing.
SERIES_IDS = ProcessCache(maxsize=200_000)

T = TypeVar("T")


class Store:
    """Writes batches through one database connection."""

    def __init__(self, connection: BaseDatabaseWrapper):
        self.connection = connection

    def save(self, upload: Upload, batch: Batch) -> None:
        """Store `batch` as the results of `upload` (inside the caller's transaction)."""
        run_ids = self.ids_by_identity(Run, list(batch.runs))
        new_runs = [run for identity, run in batch.runs.items() if identity not in run_ids]
        if new_runs:
            Run.objects.bulk_create(
                [Run(identity=run.identity, repo=run.repo, head_branch=run.head_branch,
                     head_sha=run.head_sha, workflow_id=run.workflow_id,
                     run_attempt=run.run_attempt, job_id=run.job_id, name=run.name,
                     timestamp=moment(run.timestamp), last_timestamp=moment(run.timestamp),
                     device=run.device, arch=run.arch,
                     runners=run.runners, dependencies=run.dependencies, extra=run.extra,
                     **environment_fields(run.runners, run.dependencies),
                     upload=upload) for run in new_runs],
                ignore_conflicts=True,
            )
            run_ids.update(self.ids_by_identity(Run, [run.identity for run in new_runs]))
        # The summaries and run totals are worked out while the database writes the results.
        summary_rows, counts, latest = self.insert_results(
            upload.pk, batch.results, run_ids, self.series_ids(batch.series),
            meanwhile=lambda: (batch_rows(batch, run_ids), *_run_totals(batch.results, run_ids)))
        add_rows(summary_rows)
        for run_id, count in counts.items():
            Run.objects.filter(pk=run_id).update(
                result_count=F("result_count") + count,
                last_timestamp=Greatest("last_timestamp", Value(moment(latest[run_id]))))
        for run in batch.runs.values():  # a run continued by a later upload may start earlier
            start, run_id = moment(run.timestamp), run_ids[run.identity]
            if Run.objects.filter(pk=run_id, timestamp__gt=start).update(timestamp=start):
                RunBenchmark.objects.filter(run_id=run_id).update(timestamp=start)

    def series_ids(self, series: dict[str, SeriesInfo]) -> dict[str, int]:
        """The ids of these series by identity, creating the new ones."""
        alias = self.connection.alias
        found, missing = {}, []
        for identity in series:
            series_id = SERIES_IDS.get((alias, identity))
            if series_id is None:
                missing.append(identity)
            else:
                found[identity] = series_id
        if found and self.count_series(found.values()) != len(found):
            SERIES_IDS.clear()
            found, missing = {}, list(series)
        if missing:
            looked_up = self.ids_by_identity(Series, missing)
            new = {identity: series[identity] for identity in missing
                   if identity not in looked_up}
            if new:
                self.insert_series(new)
                looked_up.update(self.ids_by_identity(Series, list(new)))
            transaction.on_commit(
                lambda: SERIES_IDS.update({(alias, identity): series_id
                                           for identity, series_id in looked_up.items()}),
                using=alias)
            found.update(looked_up)
        return found

    def ids_by_identity(self, model: type[Model], identities: list[str]) -> dict[str, int]:
        raise NotImplementedError

    def count_series(self, series_ids: Iterable[int]) -> int:
        """How many of these series ids exist."""
        raise NotImplementedError

    def insert_series(self, items: dict[str, SeriesInfo]) -> None:
        """Create series, skipping any that a concurrent upload created meanwhile."""
        raise NotImplementedError

    def insert_results(self, upload_id: int, results: list[ResultInfo],
                       run_ids: dict[str, int], series_ids: dict[str, int],
                       meanwhile: Callable[[], T]) -> T:
        """Insert the results and return what `meanwhile` returns: it is called once, where
        the database may still be writing them (after the last row is sent, on PostgreSQL),
        so that Python work that does not need them overlaps the database's."""
        raise NotImplementedError

    def refresh_statistics(self, vacuum: bool = False) -> None:
        """After a bulk load: fresh planner statistics (and, with `vacuum`, dead rows
        reclaimed), or the planner guesses badly."""
        raise NotImplementedError


class OrmStore(Store):
    """The ORM's bulk operations, for SQLite (and any database without COPY)."""

    LOOKUP_CHUNK = 5000  # identities per IN list, under SQLite's parameter limit

    def ids_by_identity(self, model, identities):
        found: dict[str, int] = {}
        for start in range(0, len(identities), self.LOOKUP_CHUNK):
            chunk = identities[start : start + self.LOOKUP_CHUNK]
            found.update(model.objects.filter(identity__in=chunk)
                         .values_list("identity", "id"))
        return found

    def count_series(self, series_ids):
        ids = list(series_ids)
        return sum(Series.objects.filter(pk__in=ids[start : start + self.LOOKUP_CHUNK]).count()
                   for start in range(0, len(ids), self.LOOKUP_CHUNK))

    def insert_series(self, items):
        Series.objects.bulk_create(
            [Series(identity=identity, suite=item.suite, **item._asdict())
             for identity, item in items.items()],
            batch_size=2000, ignore_conflicts=True,
        )

    def insert_results(self, upload_id, results, run_ids, series_ids, meanwhile):
        Result.objects.bulk_create(
            (Result(series_id=series_ids[r.series], run_id=run_ids[r.run], upload_id=upload_id,
                    timestamp=moment(r.timestamp), value=r.value, values=r.values,
                    target=r.target, string_values=r.string_values, extra_info=r.extra_info,
                    unknown=r.unknown) for r in results),
            batch_size=2000,
        )
        return meanwhile()

    def refresh_statistics(self, vacuum=False):
        """Nothing: SQLite plans the dashboards' queries well without statistics."""


class CopyStore(Store):
    """PostgreSQL: COPY for rows, one array parameter for lookups."""

    SERIES_COLUMNS = ("identity", "suite", *SeriesInfo._fields)
    JSON_SERIES_COLUMNS = ("origins", "extra_info")
    RESULT_COLUMNS = ("series_id", "run_id", "upload_id", "timestamp", "value", "values",
                      "target", "string_values", "extra_info", "unknown")
    COPY_CHUNK = 500  # lines per write: the server works on one chunk while the next is built

    def ids_by_identity(self, model, identities):
        # One array parameter (an IN list of thousands of parameters is slow to build),
        # joined as a table: see count_series.
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"SELECT identity, id FROM unnest(%s::text[]) AS given(identity) "
                f"JOIN {model._meta.db_table} USING (identity)",
                [_array_literal(identities)],
            )
            return dict(cursor.fetchall())

    def count_series(self, series_ids):
        with self.connection.cursor() as cursor:
            # A join with the unnested array probes the primary key once per id; `id = ANY(%s)`
            # with thousands of ids is planned as a scan comparing every row with every id.
            cursor.execute(f"SELECT count(*) FROM unnest(%s::bigint[]) AS given(id) "
                           f"JOIN {Series._meta.db_table} USING (id)",
                           [_array_literal(map(str, series_ids))])
            return cursor.fetchone()[0]

    def insert_series(self, items):
        table = Series._meta.db_table
        columns = ", ".join(self.SERIES_COLUMNS)
        with self.connection.cursor() as cursor:
            cursor.execute(f"CREATE TEMP TABLE new_series ON COMMIT DROP AS "
                           f"SELECT {columns} FROM {table} WITH NO DATA")
            self._copy(cursor, "new_series", self.SERIES_COLUMNS, (
                "\t".join((identity, _copy_text(item.suite), *(
                    _copy_json(value) if name in self.JSON_SERIES_COLUMNS
                    else _copy_text(value)
                    for name, value in zip(item._fields, item, strict=True)
                )))
                for identity, item in items.items()
            ))
            cursor.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM new_series "
                           "ON CONFLICT (identity) DO NOTHING")
            cursor.execute("DROP TABLE new_series")

    def insert_results(self, upload_id, results, run_ids, series_ids, meanwhile):
        def lines():
            # The columns after the series, the same for the results of one run and time.
            middles: dict[tuple[str, int], str] = {}
            for r in results:
                middle = middles.get((r.run, r.timestamp))
                if middle is None:
                    middle = middles[r.run, r.timestamp] = (
                        f"\t{run_ids[r.run]}\t{upload_id}\t{moment(r.timestamp).isoformat()}\t")
                values = r.values
                yield (f"{series_ids[r.series]}{middle}{_copy_float(r.value)}\t"
                       + (f"{{{values[0]!r}}}\t" if len(values) == 1
                          else "{" + ",".join(map(repr, values)) + "}\t")
                       + f"{_copy_float(r.target)}\t{_copy_json(r.string_values)}\t"
                         f"{_copy_json(r.extra_info)}\t{_copy_json(r.unknown)}")

        with self.connection.cursor() as cursor:
            return self._copy(cursor, Result._meta.db_table, self.RESULT_COLUMNS, lines(),
                              meanwhile)

    def refresh_statistics(self, vacuum=False):
        with self.connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE" if vacuum else "ANALYZE")

    def _copy(self, cursor, table: str, columns: tuple[str, ...], lines: Iterable[str],
              meanwhile: Callable[[], T] = lambda: None) -> T:
        """COPY rows given as lines in PostgreSQL's text format, built by the caller, sent in
        chunks of COPY_CHUNK lines; returns what `meanwhile` returns, called after the last
        is sent, while the server (another process) is still writing them and their index
        entries."""
        quoted = ", ".join(f'"{column}"' for column in columns)
        with cursor.cursor.copy(f"COPY {table} ({quoted}) FROM STDIN") as copy:
            chunk = []
            for line in lines:
                chunk.append(line)
                if len(chunk) == self.COPY_CHUNK:
                    chunk.append("")
                    copy.write("\n".join(chunk))
                    chunk = []
            if chunk:
                chunk.append("")
                copy.write("\n".join(chunk))
            return meanwhile()


def _run_totals(results: list[ResultInfo],
                run_ids: dict[str, int]) -> tuple[dict[int, int], dict[int, int]]:
    """Each run's number of results and latest result time in `results`."""
    counts: dict[int, int] = {}
    latest: dict[int, int] = {}
    for result in results:
        run_id = run_ids[result.run]
        counts[run_id] = counts.get(run_id, 0) + 1
        if result.timestamp > latest.get(run_id, 0):
            latest[run_id] = result.timestamp
    return counts, latest


def store_for(connection: BaseDatabaseWrapper) -> Store:
    """The store for this connection's database: the one place the database kind matters
    to ingestion."""
    return CopyStore(connection) if connection.vendor == "postgresql" else OrmStore(connection)


def moment(timestamp: int) -> datetime:
    """Unix seconds as the aware datetime the ORM stores."""
    return datetime.fromtimestamp(timestamp, tz=UTC)


def _array_literal(items: Iterable[str]) -> str:
    """A PostgreSQL array literal of items that need no quoting (digests, numbers): built with
    one join, where psycopg adapts a list's items one by one in Python (microseconds each)."""
    return "{" + ",".join(items) + "}"


def _copy_text(value: str) -> str:
    return (value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
            .replace("\r", "\\r"))


def _copy_float(value: float | None) -> str:
    return "\\N" if value is None else repr(value)


def _copy_json(value: Any) -> str:
    if value is None:
        return "\\N"
    # JSON text never holds a raw tab or newline; only backslashes need COPY's escaping.
    return orjson.dumps(value).decode().replace("\\", "\\\\")
