"""Run summaries (`RunSummary`): ingestion adds each upload's totals, computed from the
batch it already holds (one small upsert, no re-reading of the rows just written);
`resummarize_runs` rebuilds runs' summaries from their stored results in SQL."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from django.db import connection

from benchsite.results import v3
from benchsite.results.models import Result, Run, RunSummary, Series

# Accuracy results that count as a pass, as the PyTorch HUD counts them.
PASS_VALUES = ("pass", "pass_due_to_skip", "eager_variation")

_GROUP = ("benchmark", "mode", "dtype", "backend", "suite", "device", "arch", "metric",
          "compile_mode")
_TOTALS = ("count", "log_count", "log_sum", "string_count", "pass_count")


def _statement(where: str) -> str:
    table = RunSummary._meta.db_table
    first_string = ("r.string_values ->> 0" if connection.vendor == "postgresql"
                    else "json_extract(r.string_values, '$[0]')")
    passes = ", ".join(f"'{value}'" for value in PASS_VALUES)
    group = ", ".join(f"s.{column}" for column in _GROUP)
    # `value < %(inf)s` keeps infinities (a writer's "inf") out of the geometric mean.
    return f"""
        INSERT INTO {table} (run_id, repo, branch, timestamp, {", ".join(_GROUP)},
                             {", ".join(_TOTALS)})
        SELECT r.run_id, run.repo, run.head_branch, run.timestamp, {group},
               COUNT(r.value),
               SUM(CASE WHEN r.value > 0 AND r.value < %(inf)s THEN 1 ELSE 0 END),
               SUM(CASE WHEN r.value > 0 AND r.value < %(inf)s THEN ln(r.value) ELSE 0 END),
               SUM(CASE WHEN r.string_values IS NOT NULL THEN 1 ELSE 0 END),
               SUM(CASE WHEN {first_string} IN ({passes}) THEN 1 ELSE 0 END)
        FROM {Result._meta.db_table} r
        JOIN {Series._meta.db_table} s ON s.id = r.series_id
        JOIN {Run._meta.db_table} run ON run.id = r.run_id
        WHERE {where}
        GROUP BY r.run_id, run.repo, run.head_branch, run.timestamp, {group}
    """


def summarize_batch(batch: v3.Batch, run_ids: dict[str, int]) -> None:
    """Add a stored batch's results to its runs' summaries."""
    totals: dict[tuple, list] = {}
    for result in batch.results:
        series = batch.series[result.series]
        key = (run_ids[result.run], result.run, *(getattr(series, c) for c in _GROUP))
        total = totals.get(key)
        if total is None:
            total = totals[key] = [0, 0, 0.0, 0, 0]
        value = result.value
        if value is not None:
            total[0] += 1
            if 0 < value < math.inf:
                total[1] += 1
                total[2] += math.log(value)
        if result.string_values:
            total[3] += 1
            total[4] += result.string_values[0] in PASS_VALUES
    table = RunSummary._meta.db_table
    columns = ("run_id", "repo", "branch", "timestamp", *_GROUP, *_TOTALS)
    sql = (f"INSERT INTO {table} ({', '.join(columns)}) "
           f"VALUES ({', '.join(['%s'] * len(columns))}) "
           f"ON CONFLICT (run_id, {', '.join(_GROUP)}) DO UPDATE SET "
           + ", ".join(f"{total} = {table}.{total} + excluded.{total}" for total in _TOTALS))
    rows = []
    for (run_id, run_identity, *group), total in totals.items():
        run = batch.runs[run_identity]
        started = datetime.fromtimestamp(run.timestamp, tz=UTC)
        rows.append((run_id, run.repo, run.head_branch, started, *group, *total))
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


def resummarize_runs(run_ids: list[int]) -> None:
    """Rebuild the summaries of these runs from all their results."""
    RunSummary.objects.filter(run_id__in=run_ids).delete()
    with connection.cursor() as cursor:
        for run_id in run_ids:
            cursor.execute(_statement("r.run_id = %(run)s"),
                           {"run": run_id, "inf": float("inf")})
