"""Uploads at once that share summary rows (shards of one run; runs of one branch, which share
its slices) lock them in one order, whatever the order of their records: the second waits
for the first instead of deadlocking, and both are stored.

PostgreSQL only: SQLite locks the whole database, and these skip there (the suite runs on
both databases; on PostgreSQL nothing here can skip)."""

import json
import threading
import time

import psycopg
import pytest
from django.db import connection, connections, transaction

from benchsite.results.ingest import store_upload
from benchsite.results.ingest.summaries import add_rows
from benchsite.results.models import Run, RunSummary, SummarySlice
from tests.results.samples import META, TORCHAO, record

pytestmark = [pytest.mark.skipif(connection.vendor != "postgresql",
                                 reason="row locks: PostgreSQL only"),
              pytest.mark.django_db(transaction=True)]


def summary_rows(run: Run, metrics: str) -> list[tuple]:
    """`add_rows`' rows for `run`, a metric each, in the order given."""
    return [(run.pk, run.repo, run.head_branch, run.timestamp, "micro-benchmark api",
             "inference", "int8wo", "", "", "cuda", "NVIDIA H100 80GB HBM3", metric, "", 1, 1,
             0.0, 0, 0) for metric in metrics]


def a_run(sha: str) -> Run:
    upload = store_upload(json.dumps([record(TORCHAO)]).encode(),
                          metadata={**META, "head_sha": sha}).upload
    return Run.objects.get(upload=upload)


def waiting(monitor: psycopg.Connection) -> int:
    return monitor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                           "current_database() AND wait_event_type = 'Lock'").fetchone()[0]


def wait_until_waiting(monitor: psycopg.Connection, count: int) -> None:
    deadline = time.monotonic() + 10
    while waiting(monitor) < count:
        assert time.monotonic() < deadline, f"expected {count} statements waiting for a lock"
        time.sleep(0.01)


@pytest.mark.parametrize(("shared", "table"), [("run", RunSummary), ("branch", SummarySlice)])
def test_uploads_sharing_summaries_in_other_orders_wait_instead_of_deadlocking(shared, table):
    first = a_run("a" * 40)
    second = first if shared == "run" else a_run("b" * 40)
    for run in {first, second}:
        add_rows(summary_rows(run, "xyz"))  # the rows exist (committed): upserts lock them
    params = connection.get_connection_params()
    errors: list[Exception] = []

    def add(rows):
        try:
            with transaction.atomic():
                add_rows(rows)
        except Exception as error:  # noqa: BLE001 (asserted below)
            errors.append(error)
        finally:
            connections.close_all()

    # A third transaction holds "z": the first upload locks "x" and waits for "z", the second
    # locks "y" and waits for "z"; once "z" is let go, the first would wait for the second's
    # "y" while the second waits for its "z", unless both lock in the same order.
    with psycopg.connect(**params, autocommit=True) as monitor, \
            psycopg.connect(**params) as holder:
        holder.execute(f"SELECT 1 FROM {table._meta.db_table} WHERE metric = 'z' FOR UPDATE")
        threads = [threading.Thread(target=add, args=(summary_rows(run, order),))
                   for run, order in ((first, "xzy"), (second, "yzx"))]
        for started, thread in enumerate(threads, start=1):
            thread.start()
            wait_until_waiting(monitor, started)
        holder.commit()
        for thread in threads:
            thread.join(timeout=30)
    assert errors == []
    counts = dict(RunSummary.objects.filter(run=first, metric__in="xyz")
                  .values_list("metric", "count"))
    assert counts == ({"x": 3, "y": 3, "z": 3} if shared == "run"
                      else {"x": 2, "y": 2, "z": 2})
