"""Run summaries (`RunSummary`): one row per run and model-less slice, what the trends and
recipes pages read instead of results; the slices themselves (`SummarySlice`: one row per
repo, branch and slice, with its newest run's time), what pickers offer; and each run's
benchmarks and devices (`RunBenchmark`), where the commit pickers find the latest commits.

Ingestion adds each upload's totals, computed from the batch it already holds (one small
upsert, no re-reading of the rows just written), and its slices; `resummarize_runs` rebuilds
runs' summaries from their stored results with the same arithmetic, and `refresh_slices`
the slices of repos and branches whose runs went.
"""

from __future__ import annotations

import math
import operator
from datetime import UTC, datetime

from django.db import connection
from django.db.models import Max

from benchsite.caching import MISSING, ProcessCache
from benchsite.results.ingest.normalize import Batch, ResultInfo
from benchsite.results.models import Result, Run, RunBenchmark, RunSummary, SummarySlice

# Accuracy results that count as a pass, as the PyTorch HUD counts them.
PASS_VALUES = ("pass", "pass_due_to_skip", "eager_variation")

GROUP = ("benchmark", "mode", "dtype", "backend", "suite", "device", "arch", "metric",
         "compile_mode")
TOTALS = ("count", "log_count", "log_sum", "string_count", "pass_count")
_group_of = operator.attrgetter(*GROUP)


def _add(total: list, value: float | None, string_values: list[str] | None) -> None:
    """Count one result into `total` (in the order of TOTALS). Infinities (a writer's "inf")
    and non-positive values stay out of the geometric mean. `batch_rows` has the same
    arithmetic inline (tests/results/test_summaries.py checks that the two agree)."""
    if value is not None:
        total[0] += 1
        if 0 < value < math.inf:
            total[1] += 1
            total[2] += math.log(value)
    if string_values:
        total[3] += 1
        total[4] += string_values[0] in PASS_VALUES


# Each series' summary group as one string (its fields joined), by series identity, kept
# across uploads (the same series come back every night): a string hashes once, where the
# group's tuple was built and hashed again for every result (half of `batch_rows`).
GROUP_KEYS = ProcessCache(maxsize=200_000)
_SEPARATOR = "\0"  # no text field holds a NUL (`checks.text_problem`)


def batch_rows(batch: Batch, results: list[ResultInfo], run_ids: dict[str, int]) -> list[tuple]:
    """The summary rows of these results of a batch (for `add_rows`): plain Python, which
    ingestion does while the database writes the last of them (`_add` inline: a call a
    result cost a fifth of the loop)."""
    totals: dict[tuple[str, str], list] = {}
    group_key, series = GROUP_KEYS.lookup, batch.series
    log, inf = math.log, math.inf
    for result in results:
        group = group_key(result.series)
        if group is MISSING:
            group = _SEPARATOR.join(_group_of(series[result.series]))
            GROUP_KEYS.put(result.series, group)
        key = (result.run, group)
        total = totals.get(key)
        if total is None:
            total = totals[key] = [0, 0, 0.0, 0, 0]
        value, strings = result.value, result.string_values
        if value is not None:
            total[0] += 1
            if 0 < value < inf:
                total[1] += 1
                total[2] += log(value)
        if strings:
            total[3] += 1
            total[4] += strings[0] in PASS_VALUES
    rows = []
    for (run_identity, group), total in totals.items():
        run = batch.runs[run_identity]
        rows.append((run_ids[run_identity], run.repo, run.head_branch,
                     datetime.fromtimestamp(run.timestamp, tz=UTC), *group.split(_SEPARATOR),
                     *total))
    return rows


def resummarize_runs(run_ids: list[int]) -> None:
    """Rebuild the summaries of these runs from all their results."""
    RunSummary.objects.filter(run_id__in=run_ids).delete()
    RunBenchmark.objects.filter(run_id__in=run_ids).delete()
    runs = {run_id: (repo, branch, started) for run_id, repo, branch, started in
            Run.objects.filter(pk__in=run_ids).values_list("pk", "repo", "head_branch",
                                                            "timestamp")}
    totals: dict[tuple, list] = {}
    stored = (Result.objects.filter(run_id__in=run_ids)
              .values_list("run_id", *(f"series__{column}" for column in GROUP), "value",
                           "string_values"))
    for run_id, *group, value, string_values in stored.iterator(chunk_size=5000):
        key = (run_id, *group)
        total = totals.get(key)
        if total is None:
            total = totals[key] = [0, 0, 0.0, 0, 0]
        _add(total, value, string_values)
    add_rows([(run_id, *runs[run_id], *group, *total)
              for (run_id, *group), total in totals.items()])


def add_rows(rows: list[tuple]) -> None:
    """Add rows of (run_id, repo, branch, timestamp, *GROUP, *TOTALS) to the summaries.
    The timestamp is adapted as the ORM adapts it, so that ORM lookups on it match on every
    database (SQLite stores text, and a datetime adapted by its driver is other text).

    Each statement's rows go in the order of their key (`store`'s LOCK ORDER): two uploads
    that share rows (shards of one run, runs of one branch) wait for each other instead of
    deadlocking, whatever their records' order."""
    table = RunSummary._meta.db_table
    columns = ("run_id", "repo", "branch", "timestamp", *GROUP, *TOTALS)
    adapt = connection.ops.adapt_datetimefield_value
    _insert_many(
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES {{rows}} "
        f"ON CONFLICT (run_id, {', '.join(GROUP)}) DO UPDATE SET "
        + ", ".join(f"{total} = {table}.{total} + excluded.{total}" for total in TOTALS),
        [(*row[:3], adapt(row[3]), *row[4:])
         for row in sorted(rows, key=lambda row: (row[0], *row[4:4 + len(GROUP)]))])
    _upsert_slices(rows)
    _add_run_benchmarks(rows)


def _insert_many(sql: str, rows: list[tuple]) -> None:
    """Run `sql` with its `{rows}` as a VALUES list of `rows`, in as few statements as the
    database's parameter limit allows (an upload's few dozen summary rows were as many
    statements). The rows must be unique in the conflict's columns (an upsert may not touch
    a row twice in one statement)."""
    if not rows:
        return
    width = len(rows[0])
    limit = min(connection.features.max_query_params or MAX_PARAMETERS, MAX_PARAMETERS)
    size = max(1, limit // width)
    row = "(" + ", ".join(["%s"] * width) + ")"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), size):
            part = rows[start:start + size]
            cursor.execute(sql.format(rows=", ".join([row] * len(part))),
                           [value for values in part for value in values])


MAX_PARAMETERS = 65_535  # PostgreSQL's protocol limit of a statement's parameters

SLICE = ("repo", "branch", *GROUP)


def _upsert_slices(rows: list[tuple]) -> None:
    """Add the slices of summary rows (as `add_rows` takes them), each keeping its newest
    run's time."""
    newest: dict[tuple, datetime] = {}
    for row in rows:
        key = (*row[1:3], *row[4:4 + len(GROUP)])
        if key not in newest or row[3] > newest[key]:
            newest[key] = row[3]
    table = SummarySlice._meta.db_table
    latest = "GREATEST" if connection.vendor == "postgresql" else "max"  # SQLite's max(a, b)
    adapt = connection.ops.adapt_datetimefield_value
    _insert_many(
        f"INSERT INTO {table} ({', '.join(SLICE)}, last_at) VALUES {{rows}} "
        f"ON CONFLICT ({', '.join(SLICE)}) DO UPDATE SET "
        f"last_at = {latest}({table}.last_at, excluded.last_at)",
        [(*key, adapt(at)) for key, at in sorted(newest.items())])  # LOCK ORDER (`store`)


BENCHMARK, ARCH = 4 + GROUP.index("benchmark"), 4 + GROUP.index("arch")  # in a row


def _add_run_benchmarks(rows: list[tuple]) -> None:
    """Add the runs' benchmarks and devices of summary rows (as `add_rows` takes them), with
    each run's commit and start as stored."""
    pairs = sorted({(row[0], row[BENCHMARK], row[ARCH]) for row in rows})
    table, runs = RunBenchmark._meta.db_table, Run._meta.db_table
    # A VALUES list's columns are column1, column2... on both databases; `WHERE true` keeps
    # SQLite from reading the upsert's ON as the join's.
    _insert_many(
        f"INSERT INTO {table} (run_id, repo, branch, head_sha, timestamp, benchmark, arch) "
        f"SELECT run.id, run.repo, run.head_branch, run.head_sha, run.timestamp, "
        f"given.column2, given.column3 FROM (VALUES {{rows}}) AS given "
        f"JOIN {runs} AS run ON run.id = given.column1 WHERE true "
        "ON CONFLICT (run_id, benchmark, arch) DO NOTHING",
        pairs)


def refresh_slices(branches: set[tuple[str, str]]) -> None:
    """Rebuild the slices of these (repo, branch) pairs from their summaries: after runs or
    their results went, a slice left with no run goes, and a newest time may be earlier."""
    for repo, branch in branches:
        SummarySlice.objects.filter(repo=repo, branch=branch).delete()
        rows = (RunSummary.objects.filter(repo=repo, branch=branch).values(*SLICE)
                .annotate(last_at=Max("timestamp")).order_by())
        SummarySlice.objects.bulk_create(SummarySlice(**row) for row in rows)
