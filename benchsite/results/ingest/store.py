"""Storing a normalised upload chunk by chunk: runs and series upserted in bulk, results
inserted, run summaries and counts updated, with a number of queries that grows with the
chunks that bring new runs or series (one, in the usual upload of known series), not with the
records.

One interface, `Store`, with one implementation per kind of database, chosen in one place
(`store_for`): `CopyStore` uses PostgreSQL's COPY and array parameters (several times faster
than adapting values row by row), `OrmStore` the ORM's bulk operations (SQLite). Both are
exercised by the same tests, run on each database.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple, TypeVar

import orjson
import psycopg
from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import F, Model, Value
from django.db.models.functions import Greatest, Least
from django.db.models.sql import InsertQuery

from benchsite.caching import MISSING, ProcessCache
from benchsite.results.environment import environment_fields
from benchsite.results.ingest.normalize import Batch, ResultInfo, RunInfo, SeriesInfo
from benchsite.results.ingest.summaries import add_rows, batch_rows
from benchsite.results.models import Result, Run, RunBenchmark, Series, Upload, stored_values

# Series ids by (database alias, identity), kept across uploads by this process (looking
# thousands up by identity cost a few milliseconds an upload), where the database can say
# whether they still hold (`Store.cache_token`): the cache of an alias is emptied when its
# token changes. Ids are remembered when the transaction that saw them commits (a
# rolled-back upload adds nothing), and only if the token is still the one they were read
# under.
SERIES_IDS = ProcessCache(maxsize=200_000)
CACHE_TOKENS: dict[str, tuple] = {}  # the token SERIES_IDS holds ids under, by alias
# (alias, repo) whose series ids were read all at once into SERIES_IDS under its token: a
# process's first upload of a repo reads them in one query, so that its later chunks find
# their ids cached and are written while the next is read (not held to the end).
PRELOADED: set[tuple[str, str]] = set()
PRELOAD_LIMIT = 100_000  # series a repo; of a larger repo, the newest

# LOCK ORDER: the rows that uploads at once may share (runs, series, and in `summaries` the
# run summaries and slices) are written in the order of their key, so that two uploads that
# share some lock them in one order and one waits for the other; in their records' order,
# two uploads with other orders deadlocked (tests/results/test_summary_locks.py).

T = TypeVar("T")

NULL = "\\N"  # in COPY's text format


class Written(NamedTuple):
    """What `Store.save` wrote: how many results, and their times (Unix seconds)."""

    count: int
    timestamps: frozenset[int]


class Store:
    """Writes batches through one database connection."""

    def __init__(self, connection: BaseDatabaseWrapper):
        self.connection = connection

    def insert_upload(self, upload: Upload) -> None:
        """Insert `upload`, its raw payload included."""
        upload.save()

    def save(self, upload: Upload, batch: Batch, chunks: Iterable[list[ResultInfo]],
             complete: Callable[[], bool] = lambda: True) -> Written:
        """Store the results of `chunks` as `upload`'s (inside the caller's transaction),
        inserting `upload` first if it is new and there is a chunk.

        The chunks are consecutive slices of `batch.results`, read as they come (`mixed`):
        the batch gains their runs and series meanwhile. A chunk whose runs and series all
        have ids is written while the caller reads the next (on PostgreSQL, into a COPY left
        open between chunks). Ids are looked up, and new runs and series created, before the
        first chunk and once more at the end for the chunks held back because they brought
        new ones (an upload of new series; a new commit's run comes in the first chunk).
        The held chunks are written only if `complete()` holds once the chunks are read: an
        upload refused after its first chunks (a bad record) creates no more series.

        Once summed up, the results are let go (`batch.results` emptied) while the database
        writes the last of them: freeing 5,000 of them took 4-5 ms after the commit."""
        chunks = iter(chunks)
        first = next(chunks, None)
        if first is None:  # refused from the first chunk on: nothing to store
            return Written(0, frozenset())
        if upload.pk is None:
            self.insert_upload(upload)
        alias = self.connection.alias
        token = self.cache_token()
        if token is None or CACHE_TOKENS.get(alias) != token:
            SERIES_IDS.clear()
            PRELOADED.clear()
            CACHE_TOKENS[alias] = token
        run_ids: dict[str, int] = {}
        series_ids: dict[str, int] = {}
        runs_seen = series_seen = 0  # how many of the batch's runs and series were seen
        new_runs: list[str] = []  # seen, without ids yet
        new_series: dict[str, SeriesInfo] = {}
        looked_up: dict[str, int] = {}  # series ids read from the database
        written = 0  # results yielded (written or held): the chunks are consecutive slices
        held: list[list[ResultInfo]] = []  # chunks waiting for ids

        def look_up() -> None:
            repos = {batch.runs[identity].repo for identity in new_runs}
            if token is not None and (fresh := {r for r in repos if (alias, r) not in PRELOADED}):
                self.preload(fresh)
                for identity in list(new_series):
                    if (series_id := SERIES_IDS.get((alias, identity))) is not None:
                        series_ids[identity] = series_id
                        del new_series[identity]
            run_ids.update(self.run_ids(upload, [batch.runs[i] for i in new_runs]))
            found = self.series_ids(new_series)
            series_ids.update(found)
            looked_up.update(found)
            new_runs.clear()
            new_series.clear()

        cached_id = SERIES_IDS.lookup
        with self.writer(upload.pk, run_ids, series_ids) as writer:
            for chunk in itertools.chain([first], chunks):
                written += len(chunk)
                new_runs += _added(batch.runs, runs_seen)
                runs_seen = len(batch.runs)
                for identity in _added(batch.series, series_seen):
                    series_id = cached_id((alias, identity))
                    if series_id is MISSING:
                        new_series[identity] = batch.series[identity]
                    else:
                        series_ids[identity] = series_id
                series_seen = len(batch.series)
                if new_runs or new_series or held:
                    if writer.writing:  # looking up would end the COPY: at the end, at once
                        held.append(chunk)
                        continue
                    look_up()
                writer.write(chunk)
            if held and complete():
                writer.pause()
                look_up()
                for chunk in held:
                    writer.write(chunk)
            elif held:  # refused: the held chunks are neither written nor summed up
                written -= sum(map(len, held))
            results = batch.results[:written]

            def sum_up() -> tuple:  # while the database writes the last chunk
                summed = (batch_rows(batch, results, run_ids), *_run_totals(results, run_ids))
                results.clear()
                batch.results.clear()
                return summed

            summary_rows, counts, latest, timestamps = writer.finish(meanwhile=sum_up)
        if token is not None:
            transaction.on_commit(lambda: _remember(alias, token, looked_up), using=alias)
        with self.batched():
            add_rows(summary_rows)
            for identity, run_id in sorted(run_ids.items(), key=itemgetter(1)):  # LOCK ORDER
                # A run continued by a later upload may start earlier, and a run's start is
                # its earliest record's, which may come after the run was created; its
                # benchmarks carry its start.
                start = moment(batch.runs[identity].timestamp)
                Run.objects.filter(pk=run_id).update(
                    result_count=F("result_count") + counts.get(run_id, 0),
                    last_timestamp=Greatest("last_timestamp",
                                            Value(moment(latest.get(run_id, 0)))),
                    timestamp=Least("timestamp", Value(start)))
                RunBenchmark.objects.filter(run_id=run_id, timestamp__gt=start).update(
                    timestamp=start)
        return Written(written, frozenset(timestamps))

    def batched(self) -> AbstractContextManager:
        """Statements whose results (and row counts) nobody reads, sent without waiting for
        each other's where the database allows; an error raises at the end at the latest."""
        return nullcontext()

    def preload(self, repos: set[str]) -> None:
        """Cache the ids of these repos' series (committed rows, read under the current
        token), at most PRELOAD_LIMIT a repo, the newest."""
        alias = self.connection.alias
        for repo in sorted(repos):
            ids = (Series.objects.filter(repo=repo).order_by("-id")
                   .values_list("identity", "id")[:PRELOAD_LIMIT])
            SERIES_IDS.update({(alias, identity): series_id for identity, series_id in ids})
            PRELOADED.add((alias, repo))

    def run_ids(self, upload: Upload, runs: list[RunInfo]) -> dict[str, int]:
        """The ids of these runs by identity, creating the new ones as `upload`'s."""
        run_ids = self.ids_by_identity(Run, [run.identity for run in runs])
        new_runs = [run for run in runs if run.identity not in run_ids]
        if new_runs:
            Run.objects.bulk_create(
                [Run(identity=run.identity, repo=run.repo, head_branch=run.head_branch,
                     head_sha=run.head_sha, workflow_id=run.workflow_id,
                     run_attempt=run.run_attempt, job_id=run.job_id, name=run.name,
                     timestamp=moment(run.timestamp), last_timestamp=moment(run.timestamp),
                     device=run.device, arch=run.arch,
                     runners=run.runners, dependencies=run.dependencies, extra=run.extra,
                     **environment_fields(run.runners, run.dependencies),
                     upload=upload)
                 for run in sorted(new_runs, key=attrgetter("identity"))],  # LOCK ORDER
                ignore_conflicts=True,
            )
            run_ids.update(self.ids_by_identity(Run, [run.identity for run in new_runs]))
        return run_ids

    def series_ids(self, series: dict[str, SeriesInfo]) -> dict[str, int]:
        """The ids of these series by identity, creating the new ones."""
        if not series:
            return {}
        found = self.ids_by_identity(Series, list(series))
        new = {identity: item for identity, item in series.items() if identity not in found}
        if new:
            self.insert_series(new)
            found.update(self.ids_by_identity(Series, list(new)))
        return found

    def writer(self, upload_id: int, run_ids: dict[str, int],
               series_ids: dict[str, int]) -> ResultWriter:
        """A writer of results of `upload_id`, with the ids these maps hold when it writes."""
        raise NotImplementedError

    def ids_by_identity(self, model: type[Model], identities: list[str]) -> dict[str, int]:
        raise NotImplementedError

    def cache_token(self) -> tuple | None:
        """What changes whenever cached series ids may have gone (series deleted, the table
        emptied or restored); None where the database cannot say (nothing is cached)."""
        return None

    def insert_series(self, items: dict[str, SeriesInfo]) -> None:
        """Create series, skipping any that a concurrent upload created meanwhile."""
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

    def insert_series(self, items):
        Series.objects.bulk_create(
            [Series(identity=identity, suite=item.suite, **item._asdict())
             for identity, item in items.items()],
            batch_size=2000, ignore_conflicts=True,
        )

    def writer(self, upload_id, run_ids, series_ids):
        return OrmWriter(upload_id, run_ids, series_ids)

    def refresh_statistics(self, vacuum=False):
        """Nothing: SQLite plans the dashboards' queries well without statistics."""


class CopyStore(Store):
    """PostgreSQL: COPY for rows, one array parameter for lookups."""

    SERIES_COLUMNS = ("identity", "suite", *SeriesInfo._fields)
    JSON_SERIES_COLUMNS = ("origins", "extra_info")

    def insert_upload(self, upload):
        # The ORM's INSERT ... RETURNING, sent with its parameters bound on the server:
        # Django binds them in the client, and a payload went into the SQL text as hex, which
        # cost the server about 15 ms a MiB to read; bound in binary, it is copied. One
        # statement, where saving without the payload and adding it after took two and the
        # model's save (1-1.5 ms of Python an upload).
        query = InsertQuery(Upload)
        query.insert_values([field for field in Upload._meta.concrete_fields
                             if not field.primary_key], [upload])
        compiler = query.get_compiler(connection=self.connection)
        compiler.returning_fields = [Upload._meta.pk]
        [(sql, params)] = compiler.as_sql()
        with (self.connection.wrap_database_errors,
              psycopg.Cursor(self.connection.connection) as cursor):
            cursor.execute(sql, params)
            upload.pk = cursor.fetchone()[0]
        upload._state.adding, upload._state.db = False, self.connection.alias

    def ids_by_identity(self, model, identities):
        # One array parameter (an IN list of thousands of parameters is slow to build),
        # joined as a table: the join probes the index once an identity, where `= ANY(%s)`
        # with thousands of values was planned as a scan comparing every row with each.
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"SELECT identity, id FROM unnest(%s::text[]) AS given(identity) "
                f"JOIN {model._meta.db_table} USING (identity)",
                [_array_literal(identities)],
            )
            return dict(cursor.fetchall())

    def cache_token(self):
        # A sequence bumped by a trigger on every DELETE or TRUNCATE of series (migration
        # results.0016), and the table's file node, which TRUNCATE and a restore change.
        with self.connection.cursor() as cursor:
            cursor.execute(f"SELECT pg_relation_filenode('{Series._meta.db_table}'), "
                           "last_value, is_called FROM results_series_deletions")
            return cursor.fetchone()

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
                           "ORDER BY identity ON CONFLICT (identity) DO NOTHING")  # LOCK ORDER
            cursor.execute("DROP TABLE new_series")

    def writer(self, upload_id, run_ids, series_ids):
        return CopyWriter(self.connection, upload_id, run_ids, series_ids)

    @contextmanager
    def batched(self):
        # psycopg's pipeline mode: the server runs a statement while Python builds the next
        # (the ORM's few milliseconds an upload), and its errors raise as Django's.
        with self.connection.wrap_database_errors, self.connection.connection.pipeline():
            yield

    def refresh_statistics(self, vacuum=False):
        with self.connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE" if vacuum else "ANALYZE")

    def _copy(self, cursor, table: str, columns: tuple[str, ...], lines: Iterable[str]) -> None:
        """COPY rows given as lines in PostgreSQL's text format."""
        with cursor.cursor.copy(f"COPY {table} ({_quoted(columns)}) FROM STDIN") as copy:
            copy.write("".join(f"{line}\n" for line in lines))


class ResultWriter:
    """Writes an upload's results chunk by chunk, taking their ids from the maps it was
    given (filled by `Store.save` before each chunk); a context manager."""

    def __init__(self, upload_id: int, run_ids: dict[str, int], series_ids: dict[str, int]):
        self.upload_id = upload_id
        self.run_ids = run_ids
        self.series_ids = series_ids

    def write(self, results: list[ResultInfo]) -> None:
        raise NotImplementedError

    @property
    def writing(self) -> bool:
        """Whether a chunk that needs ids looked up waits for the end (on PostgreSQL: a COPY
        is open, which a lookup would end; `pause` ends it)."""
        return False

    def pause(self) -> None:
        """Let other statements run on the connection (the store's lookups)."""

    def finish(self, meanwhile: Callable[[], T]) -> T:
        """Complete the writes and return what `meanwhile` returns: it is called once, where
        the database may still be writing (on PostgreSQL, after the last row is sent), so
        that Python work that does not need the rows overlaps the database's."""
        return meanwhile()

    def __enter__(self) -> ResultWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        pass


class OrmWriter(ResultWriter):
    """Inserts each chunk as it comes (SQLite). Once one is written, a chunk that brings new
    runs or series is held to the end, as on PostgreSQL: one lookup more an upload, and
    none at all for an upload refused midway (a bad record in a large upload of new series
    was 5.5 s on SQLite, with a lookup a chunk, against 1.3 s on PostgreSQL)."""

    wrote = False

    @property
    def writing(self) -> bool:
        return self.wrote

    def write(self, results):
        self.wrote = True
        run_ids, series_ids, upload_id = self.run_ids, self.series_ids, self.upload_id
        Result.objects.bulk_create(
            (Result(series_id=series_ids[r.series], run_id=run_ids[r.run], upload_id=upload_id,
                    timestamp=moment(r.timestamp), value=r.value,
                    values=stored_values(r.values, r.value),
                    target=r.target, string_values=r.string_values, extra_info=r.extra_info,
                    unknown=r.unknown) for r in results),
            batch_size=2000,
        )


class CopyWriter(ResultWriter):
    """One COPY left open from chunk to chunk: the server (another process) stores a chunk
    while Python reads the next; it ends only where the store must look ids up."""

    COLUMNS = ("series_id", "run_id", "upload_id", "timestamp", "value", "values", "target",
               "string_values", "extra_info", "unknown")

    def __init__(self, connection, upload_id, run_ids, series_ids):
        super().__init__(upload_id, run_ids, series_ids)
        self.connection = connection
        self.cursor = None
        self.copy = None  # the open COPY's context manager and its Copy
        # The columns after the series, the same for the results of one run and time.
        self.middles: dict[tuple[str, int], str] = {}
        # The COPY text of each extra_info dict, by identity (the fast path gives the results
        # of one metric text one dict), with the dict: held, its identity is not reused.
        self.extras: dict[int, tuple[dict, str]] = {}

    def write(self, results):
        if self.copy is None:
            manager = self.cursor.cursor.copy(
                f"COPY {Result._meta.db_table} ({_quoted(self.COLUMNS)}) FROM STDIN")
            self.copy = (manager, manager.__enter__())
        run_ids, series_ids, middles, extras = (self.run_ids, self.series_ids, self.middles,
                                                self.extras)
        lines = []
        append = lines.append
        last_run = last_timestamp = middle = None
        for r in results:  # a few microseconds a row: the common cases inline
            run, timestamp = r.run, r.timestamp
            if run is not last_run or timestamp != last_timestamp:
                middle = middles.get((run, timestamp))
                if middle is None:
                    middle = middles[run, timestamp] = (
                        f"\t{run_ids[run]}\t{self.upload_id}\t"
                        f"{moment(timestamp).isoformat()}\t")
                last_run, last_timestamp = run, timestamp
            values, value, target = r.values, r.value, r.target
            strings, extra, unknown = r.string_values, r.extra_info, r.unknown
            if extra is None:
                extra_text = NULL
            elif (known := extras.get(id(extra))) is not None and known[0] is extra:
                extra_text = known[1]
            else:
                extra_text = _copy_json(extra)
                extras[id(extra)] = (extra, extra_text)
            # values as `stored_values` has them: null but for 2+ repetitions or a NaN one
            append(f"{series_ids[r.series]}{middle}{NULL if value is None else repr(value)}\t"
                   + (f"{NULL}\t" if len(values) < 2 and (value is not None or not values)
                      else "{" + ",".join(map(repr, values)) + "}\t")
                   + f"{NULL if target is None else repr(target)}\t"
                     f"{NULL if strings is None else _copy_json(strings)}\t"
                     f"{extra_text}\t{NULL if unknown is None else _copy_json(unknown)}\n")
        self.copy[1].write("".join(lines))

    @property
    def writing(self):
        return self.copy is not None

    def pause(self):
        self._end(None, None, None)

    def finish(self, meanwhile):
        value = meanwhile()
        self.pause()
        return value

    def __enter__(self):
        self.cursor = self.connection.cursor()
        return self

    def __exit__(self, *exc_info):
        try:
            self._end(*exc_info)  # an error aborts the COPY (and so the transaction)
        finally:
            self.cursor.close()

    def _end(self, *exc_info) -> None:
        if self.copy is not None:
            manager, self.copy = self.copy[0], None
            manager.__exit__(*exc_info)


def _remember(alias: str, token: tuple, series_ids: dict[str, int]) -> None:
    """Cache series ids read under `token`, unless the alias's token has changed since."""
    if CACHE_TOKENS.get(alias) == token:
        SERIES_IDS.update({(alias, identity): series_id
                           for identity, series_id in series_ids.items()})


def _added(items: dict, seen: int) -> list:
    """The keys added to `items` after its first `seen` (read from the end: a dict keeps
    insertion order, and this costs what was added, not what was there)."""
    added = list(itertools.islice(reversed(items), len(items) - seen))
    added.reverse()
    return added


def _quoted(columns: tuple[str, ...]) -> str:
    return ", ".join(f'"{column}"' for column in columns)


def _run_totals(results: list[ResultInfo], run_ids: dict[str, int],
                ) -> tuple[dict[int, int], dict[int, int], set[int]]:
    """Each run's number of results and latest result time in `results`, and their times."""
    counts: dict[int, int] = {}
    latest: dict[int, int] = {}
    timestamps: set[int] = set()
    for result in results:
        run_id, timestamp = run_ids[result.run], result.timestamp
        counts[run_id] = counts.get(run_id, 0) + 1
        if timestamp > latest.get(run_id, 0):
            latest[run_id] = timestamp
        timestamps.add(timestamp)
    return counts, latest, timestamps


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


def _copy_json(value: Any) -> str:
    if value is None:
        return NULL
    # JSON text never holds a raw tab or newline; only backslashes need COPY's escaping.
    return orjson.dumps(value).decode().replace("\\", "\\\\")
