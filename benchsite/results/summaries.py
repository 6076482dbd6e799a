"""Run summaries (`RunSummary`), maintained by ingestion with one SQL statement per upload."""

from __future__ import annotations

from django.db import connection

from benchsite.results.models import Result, Run, RunSummary, Series

# Accuracy results that count as a pass, as the PyTorch HUD counts them.
PASS_VALUES = ("pass", "pass_due_to_skip", "eager_variation")

_GROUP = ("benchmark", "mode", "dtype", "backend", "suite", "device", "arch", "metric",
          "compile_mode")
_TOTALS = ("count", "log_count", "log_sum", "string_count", "pass_count")


def _statement(where: str, upsert: bool) -> str:
    table = RunSummary._meta.db_table
    first_string = ("r.string_values ->> 0" if connection.vendor == "postgresql"
                    else "json_extract(r.string_values, '$[0]')")
    passes = ", ".join(f"'{value}'" for value in PASS_VALUES)
    group = ", ".join(f"s.{column}" for column in _GROUP)
    conflict = ""
    if upsert:
        conflict = (
            f" ON CONFLICT (run_id, {', '.join(_GROUP)}) DO UPDATE SET "
            + ", ".join(f"{total} = {table}.{total} + excluded.{total}" for total in _TOTALS)
        )
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
        GROUP BY r.run_id, run.repo, run.head_branch, run.timestamp, {group}{conflict}
    """


def summarize_upload(upload_id: int) -> None:
    """Add an upload's results to its runs' summaries."""
    with connection.cursor() as cursor:
        cursor.execute(_statement("r.upload_id = %(upload)s", upsert=True),
                       {"upload": upload_id, "inf": float("inf")})


def resummarize_runs(run_ids: list[int]) -> None:
    """Rebuild the summaries of these runs from all their results."""
    RunSummary.objects.filter(run_id__in=run_ids).delete()
    with connection.cursor() as cursor:
        for run_id in run_ids:
            cursor.execute(_statement("r.run_id = %(run)s", upsert=False),
                           {"run": run_id, "inf": float("inf")})
