"""Stored series baselines (`judge.Baseline`) as of their default-branch points: computed
from the history, stored (`SeriesBaseline`) and read back. (Not the reference detectors
the change-point detector is measured against: `regressions.detect.reference_detectors`.)

A comparison judges each series against its baseline at the base commit. Reading the
history for that costs `lookback_points` rows a series (a million rows to compare two
nights of 18,000 series); the stored baseline costs one. Detection stores the baseline of
the newest point of every series it looks at; `manage.py baselines` fills in the older
points (after an upgrade, or a change of `lookback_points`). Where none is stored, the
comparison computes it from the history as before.

A level starts at the series' latest recorded change: the callers (detection, which
records changes) pass each series' changes in (`regressions.changes.recorded_changes`).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable
from datetime import datetime

import numpy as np
from django.db import connection, transaction
from django.db.models import QuerySet

from benchsite.comparison import judge
from benchsite.comparison.history import History, recent
from benchsite.comparison.models import SeriesBaseline

FIELDS = ("level", "noise", "freedom", "points", "since")
BATCH = 5000  # rows a bulk write


def _windows(history: History, ends: range, lookback: int,
             changes: list[datetime]) -> tuple[np.ndarray, np.ndarray]:
    """The `lookback` points up to each end (exclusive) as rows, right-aligned and NaN-
    padded, and the column each row's level starts from: its first point at or after the
    latest change (of `changes`, sorted) up to its newest point."""
    padded = np.concatenate([np.full(lookback - 1, np.nan), history.values])
    # (sliced, not `sliding_window_view`: detection asks for one row a series, of thousands)
    rows = np.stack([padded[end - 1 : end - 1 + lookback] for end in ends])
    starts = [max(0, level_start(history, changes, end) - (end - lookback)) for end in ends]
    return rows, np.array(starts, dtype=int)


def level_start(history: History, changes: list[datetime], end: int | None = None) -> int:
    """Where a series' level starts in its history up to point `end` (exclusive; the whole
    history by default): its first point at or after the latest of `changes` (sorted) by
    then, 0 without one."""
    end = len(history) if end is None else end
    before = bisect.bisect_right(changes, history.timestamps[end - 1])
    return 0 if not before else bisect.bisect_left(history.timestamps, changes[before - 1])


def of_histories(histories: dict[int, History], changes: dict[int, list[datetime]],
                 lookback: int, points: int = 1) -> dict[tuple[int, int], judge.Baseline]:
    """The baselines of the newest `points` points of each history, by (series, run): each
    from the `lookback` points up to it, the level from the series' latest change
    (`changes`: each series' recorded changes, sorted) up to it."""
    keys, rows, starts = [], [], []
    for pk, history in histories.items():
        ends = range(max(1, len(history) - points + 1), len(history) + 1)
        if not len(ends):
            continue
        windows, first = _windows(history, ends, lookback, changes.get(pk, []))
        keys += [(pk, history.run_ids[end - 1]) for end in ends]
        rows.append(windows)
        starts.append(first)
    if not keys:
        return {}
    return dict(zip(keys, judge.baselines(np.concatenate(rows), np.concatenate(starts)),
                    strict=True))


def store_newest(histories: dict[int, History], changes: dict[int, list[datetime]],
                 lookback: int) -> int:
    """Store the baseline of each history's newest point, each from the `lookback` points up
    to it (detection calls this after it recorded what it found, with each series' recorded
    changes, so a change found now is the level's start)."""
    return _write(of_histories(histories, changes, lookback))


def backfill(series_ids: list[int], branches: list[str], changes: dict[int, list[datetime]],
             lookback: int, points: int) -> int:
    """Store the baselines of the last `points` points of each series (each from the
    `lookback` points before it; `changes`: each series' recorded changes, sorted);
    returns how many were stored."""
    histories = recent(series_ids, points + lookback - 1, branches)
    return _write(of_histories(histories, changes, lookback, points))


def _write(found: dict[tuple[int, int], judge.Baseline]) -> int:
    """Insert or replace these baselines: on PostgreSQL through COPY into a temporary table
    (bulk_create with ON CONFLICT wrote ~5,000 rows/s, 40x slower), elsewhere the ORM."""
    if connection.vendor == "postgresql":
        _copy(found)
        return len(found)
    rows = [SeriesBaseline(series_id=pk, run_id=run, **dataclasses.asdict(one))
            for (pk, run), one in found.items()]
    for first in range(0, len(rows), BATCH):
        SeriesBaseline.objects.bulk_create(
            rows[first:first + BATCH], update_conflicts=True,
            unique_fields=["run", "series"], update_fields=list(FIELDS))
    return len(rows)


def _copy(found: dict[tuple[int, int], judge.Baseline]) -> None:
    """Written in order of run, as a comparison reads them (a commit's runs). A backfill
    finds them series by series: written in that order, a commit's 14,138 baselines lay on
    13,995 pages at 10M results; in order of run, on 232."""
    table = SeriesBaseline._meta.db_table
    columns = ", ".join(("series_id", "run_id", *FIELDS))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("CREATE TEMPORARY TABLE IF NOT EXISTS baseline_load (series_id bigint, "
                       "run_id bigint, level float8, noise float8, freedom float8, "
                       "points integer, since integer) ON COMMIT DELETE ROWS")
        # Inside an outer transaction nothing commits: an earlier write's rows are there.
        cursor.execute("TRUNCATE baseline_load")
        with cursor.cursor.copy(f"COPY baseline_load ({columns}) FROM STDIN") as copy:
            for (pk, run), one in sorted(found.items(), key=_by_run):
                copy.write_row((pk, run, one.level, one.noise, one.freedom, one.points,
                                one.since))
        cursor.execute(
            f"INSERT INTO {table} ({columns}) SELECT {columns} FROM baseline_load "
            f"ON CONFLICT (run_id, series_id) DO UPDATE SET "
            + ", ".join(f"{name} = EXCLUDED.{name}" for name in FIELDS))


def _by_run(item: tuple[tuple[int, int], judge.Baseline]) -> tuple[int, int]:
    (pk, run), _ = item
    return run, pk


def stored(series_ids: Iterable[int], run_ids: Iterable[int]) -> dict[int, judge.Baseline]:
    """The baselines stored for these series at these runs (a commit's runs). Read by run
    alone: a list of thousands of series ids costs the database more than the few rows of
    other series it lets through."""
    wanted = set(series_ids)
    return {pk: judge.Baseline(*values) for pk, *values in of_runs(run_ids) if pk in wanted}


def of_runs(run_ids: Iterable[int]) -> QuerySet:
    """(series id, *FIELDS) of every baseline stored at these runs: found through the unique
    (run, series) index."""
    return SeriesBaseline.objects.filter(run_id__in=list(run_ids)).values_list(
        "series_id", *FIELDS)
