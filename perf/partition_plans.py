"""How the pages' queries of results behave on the monthly partitions (PostgreSQL).

    .venv/bin/python manage.py load_demo --nights 120     # or seed_history: several months
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/DB .venv/bin/python perf/partition_plans.py

For each query (a run's results and a commit's, each read within its runs' times, a
series' latest points, a series over 30 days, the query API's newest rows, the explorer's
points of 20 series): the partitions its plan reads, and its planning and execution time
(median of --repeat EXPLAIN ANALYZE runs) against the same SQL on a plain copy of the table
with the same indexes, made in this run inside a transaction that is rolled back. --plans
prints each plan.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")

import django  # noqa: E402

django.setup()

from django.db import connection, transaction  # noqa: E402
from django.db.models import Max, Min  # noqa: E402

from benchsite.results.models import Result, Run  # noqa: E402
from benchsite.results.partitions import partitions  # noqa: E402

PLAIN = "perf_results_plain"


def queries() -> dict[str, str]:
    """The SQL of each page's query of results, for a run and series in the middle."""
    first, last = Result.objects.aggregate(Min("timestamp"), Max("timestamp")).values()
    middle = first + (last - first) / 2
    run = Run.objects.filter(timestamp__gte=middle, result_count__gt=0).order_by("timestamp")[0]
    series_ids = list(Result.objects.filter(run=run).values_list("series_id", flat=True))
    series_id = series_ids[0]
    month = (middle - timedelta(days=15), middle + timedelta(days=15))
    found = {
        "run page: its results": Result.objects.of_run(run).values_list(
            "series__model", "value"),
        "commit page: of_commit": Result.objects.of_commit(run.repo, run.head_sha)
        .values_list("series__model", "value"),
        "regression page: latest 200 of a series": Result.objects.filter(series_id=series_id)
        .order_by("-timestamp", "-id").values_list("timestamp", "value")[:200],
        "trend: a series over 30 days": Result.objects.filter(
            series_id=series_id, timestamp__gte=month[0], timestamp__lt=month[1])
        .order_by("timestamp").values_list("timestamp", "value"),
        "query API: newest 100": Result.objects.order_by("-timestamp", "-id")
        .values_list("id", "value")[:100],
        "explorer: 20 series' points over 30 days": Result.objects.filter(
            timestamp__gte=last - timedelta(days=30), timestamp__lt=last,
            run__head_branch=run.head_branch, series_id__in=series_ids[:20])
        .order_by("series_id", "timestamp").values_list("series_id", "value"),
    }
    return {name: connection.ops.compose_sql(*query.query.sql_with_params())
            for name, query in found.items()}


def explain(cursor, sql: str, repeat: int) -> tuple[float, float, str]:
    """Median planning and execution milliseconds, and the plan."""
    planning, execution = [], []
    for _ in range(repeat):
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")
        plan = "\n".join(line for (line,) in cursor.fetchall())
        planning.append(float(re.search(r"Planning Time: ([\d.]+)", plan)[1]))
        execution.append(float(re.search(r"Execution Time: ([\d.]+)", plan)[1]))
    return statistics.median(planning), statistics.median(execution), plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--plans", action="store_true")
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        sys.exit("PostgreSQL only")
    months = partitions(connection, count=True)
    print(f"{sum(p.rows for p in months)} results in {len(months)} partitions: "
          + ", ".join(f"{p.name.removeprefix('results_result_')} {p.rows}" for p in months))
    sqls = queries()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMP TABLE {PLAIN} AS SELECT * FROM results_result")
        cursor.execute(f"CREATE INDEX ON {PLAIN} (id)")
        cursor.execute(f"CREATE INDEX ON {PLAIN} (series_id, timestamp)")
        cursor.execute(f"CREATE INDEX ON {PLAIN} (run_id, series_id)")
        cursor.execute(f"CREATE INDEX ON {PLAIN} (timestamp, id)")
        cursor.execute(f"ANALYZE {PLAIN}")
        cursor.execute("ANALYZE results_result")
        print(f"{'query':<42} {'parts':>5} {'plan ms':>8} {'run ms':>8} "
              f"{'plain plan':>10} {'plain run':>9} {'ratio':>6}")
        for name, sql in sqls.items():
            plan_ms, run_ms, plan = explain(cursor, sql, args.repeat)
            plain_sql = sql.replace('"results_result"', PLAIN)
            plain_plan_ms, plain_run_ms, plain_plan = explain(cursor, plain_sql, args.repeat)
            read = len(set(re.findall(r"on (results_result_(?:p\d{4}_\d\d|default))\b", plan)))
            ratio = (plan_ms + run_ms) / (plain_plan_ms + plain_run_ms)
            print(f"{name:<42} {read:>5} {plan_ms:>8.2f} {run_ms:>8.2f} "
                  f"{plain_plan_ms:>10.2f} {plain_run_ms:>9.2f} {ratio:>6.2f}")
            if args.plans:
                print(f"-- partitioned:\n{plan}\n-- plain:\n{plain_plan}\n")
        transaction.set_rollback(True)


if __name__ == "__main__":
    main()
