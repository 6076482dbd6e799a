"""The results table partitioned by month on PostgreSQL (results.partitions, migration 0011).

PostgreSQL only: on SQLite the table stays plain, and these skip (the suite runs on both
databases; on PostgreSQL nothing here can skip)."""

import re
import threading
from datetime import UTC, date, datetime

import orjson
import pytest
from django.core.management import call_command
from django.db import connection, connections, transaction
from django.test import TestCase
from django.test.utils import CaptureQueriesContext

from benchsite.results import partitions
from benchsite.results.ingest import delete_uploads, mixed, store_upload
from benchsite.results.models import Result, Run, Series, Upload
from tests.migrating import migrate, migrate_to_latest
from tests.results.samples import META, record

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql",
                                reason="only PostgreSQL partitions the results table")

BEFORE = [("results", "0010_run_last_timestamp")]
AFTER = [("results", "0011_partition_results")]
INDEXES = {"results_result_pkey", "results_res_series__a8d970_idx",
           "results_res_run_id_430b47_idx", "results_res_timesta_e73c2f_idx",
           "results_result_upload_id_e55d19de"}


@pytest.fixture(autouse=True)
def _nothing_known():
    """Months remembered by earlier tests may have been rolled back."""
    partitions.KNOWN.clear()
    yield
    partitions.KNOWN.clear()


def unix(year: int, month: int, day: int = 15) -> int:
    return int(datetime(year, month, day, 12, tzinfo=UTC).timestamp())


def upload(when: int, sha: str = "a" * 40) -> Upload:
    """An upload of one result at `when`, committed (its month made after the commit)."""
    body = orjson.dumps([record(**{**META, "timestamp": when, "head_sha": sha})])
    with TestCase.captureOnCommitCallbacks(execute=True):
        return store_upload(body, announce=False).upload


def homes() -> dict[int, str]:
    """Each result's partition, by id."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, tableoid::regclass::text FROM results_result")
        return dict(cursor.fetchall())


def table_shape() -> tuple[str, dict[str, str]]:
    """The table's kind ('p' partitioned, 'r' plain) and its indexes' columns by name."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = 'results_result'::regclass")
        kind = cursor.fetchone()[0]
        cursor.execute("SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i "
                       "JOIN pg_class c ON c.oid = i.indexrelid "
                       "WHERE i.indrelid = 'results_result'::regclass")
        return kind, {name: definition.split(" USING ")[1] for name, definition in cursor}


@pytest.mark.django_db(transaction=True)
def test_the_migration_moves_existing_rows_into_their_months_and_back():
    try:
        apps = migrate(BEFORE)
        models = {name: apps.get_model("results", name) for name in ("Upload", "Run", "Series",
                                                                     "Result")}
        old_upload = models["Upload"].objects.create(content_hash="h", payload_gzip=b"")
        run = models["Run"].objects.create(identity="r", repo="pytorch/ao", head_branch="main",
                                           head_sha="s",
                                           timestamp=datetime(2025, 11, 1, tzinfo=UTC),
                                           last_timestamp=datetime(2026, 2, 3, tzinfo=UTC),
                                           upload=old_upload)
        series = models["Series"].objects.create(identity="s", repo="pytorch/ao",
                                                 benchmark="b", model="m", metric="x")
        moments = [datetime(2025, 11, 30, 23, 59, tzinfo=UTC),
                   datetime(2025, 12, 1, tzinfo=UTC), datetime(2026, 2, 3, tzinfo=UTC)]
        ids = [models["Result"].objects.create(series=series, run=run, upload=old_upload,
                                               timestamp=moment, value=i, values=[i]).pk
               for i, moment in enumerate(moments)]
        plain = table_shape()
        assert plain[0] == "r" and set(plain[1]) == INDEXES

        migrate(AFTER)
        kind, indexes = table_shape()
        assert kind == "p"
        assert indexes == {**plain[1], "results_result_pkey": 'btree (id, "timestamp")'}
        assert homes() == dict(zip(ids, ["results_result_p2025_11", "results_result_p2025_12",
                                         "results_result_p2026_02"], strict=True))
        assert [p.name for p in partitions.partitions(connection)] == [
            "results_result_p2025_11", "results_result_p2025_12", "results_result_p2026_02",
            "results_result_default"]
        kept = Result.objects.order_by("id")
        assert [(r.pk, r.timestamp, r.value) for r in kept] == [
            (pk, moment, float(i)) for i, (pk, moment) in enumerate(zip(ids, moments,
                                                                        strict=True))]
        # The id sequence carried on: a new row (ORM insert into a month with no
        # partition) gets the next id and lands in DEFAULT.
        new = Result.objects.create(series_id=series.pk, run_id=run.pk,
                                    upload_id=old_upload.pk,
                                    timestamp=datetime(2026, 1, 5, tzinfo=UTC), values=[])
        assert new.pk == ids[-1] + 1 and homes()[new.pk] == "results_result_default"

        migrate(BEFORE)
        assert table_shape() == plain
        assert sorted(homes()) == [*ids, new.pk]
        assert Result.objects.create(series_id=series.pk, run_id=run.pk,
                                     upload_id=old_upload.pk, timestamp=moments[0],
                                     values=[]).pk == new.pk + 1
    finally:
        migrate_to_latest()
    assert table_shape()[0] == "p"


COMPACT = [("results", "0017_compact_result_indexes")]
BRIN = "WITH (pages_per_range='32', autosummarize='on')"
COMPACT_INDEXES = {
    "results_result_pkey": 'btree ("timestamp", id)',
    "results_res_series__a8d970_idx": 'btree (series_id, "timestamp")',
    "results_res_run_id_5a061e_idx": "btree (run_id)",
    "results_result_upload_id_e55d19de": f"brin (upload_id) {BRIN}",
    "results_result_id_brin": f"brin (id) {BRIN}",
}


@pytest.mark.django_db(transaction=True)
def test_0017_keys_results_by_time_finds_uploads_by_brin_and_goes_back():
    stored = upload(unix(2026, 1)).pk  # one repetition: its values stored null
    try:
        migrate([("results", "0016_series_deletions")])
        # 0018 undone: the null values written as the array they stand for
        assert list(Result.objects.values_list("values", flat=True)) == [[1.25]]
        before = table_shape()
        assert before[1]["results_result_pkey"] == 'btree (id, "timestamp")'
        assert {"results_res_timesta_e73c2f_idx", "results_res_run_id_430b47_idx"} <= set(
            before[1])

        migrate(COMPACT)
        assert table_shape() == ("p", COMPACT_INDEXES)
        assert Result.objects.filter(upload_id=stored).count() == 1

        migrate([("results", "0016_series_deletions")])
        assert table_shape() == before
    finally:
        migrate_to_latest()


def test_the_newest_results_and_an_uploads_are_found_by_index(db):
    """The query API's order is the primary key scanned backwards; an upload's rows come
    from its BRIN index (plans forced off the table scans that a few rows would get)."""
    upload(unix(2026, 1))
    newest = upload(unix(2026, 2))
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
    assert ("Index Scan Backward using results_result_p2026_02_pkey"
            in Result.objects.order_by("-timestamp", "-id")[:100].explain())
    assert ("Bitmap Index Scan on results_result_p2026_02_upload_id_idx"
            in Result.objects.filter(upload=newest).explain())


def test_the_first_chunks_months_are_made_first_and_a_later_chunks_after_the_commit(
        db, monkeypatch):
    monkeypatch.setattr(mixed, "CHUNK", 1)
    body = orjson.dumps([record(**{**META, "timestamp": unix(2031, 3)}),
                         record(**{**META, "timestamp": unix(2031, 4)}, model={"name": "m"})])
    with TestCase.captureOnCommitCallbacks() as after_commit:
        stored = store_upload(body, announce=False).upload
    # The first chunk's month was made before the upload's transaction (making it inside
    # would hold its locks until the commit); the second chunk's waits in DEFAULT.
    assert sorted(homes().values()) == ["results_result_default", "results_result_p2031_03"]
    for callback in after_commit:
        callback()
    assert sorted(homes().values()) == ["results_result_p2031_03", "results_result_p2031_04"]
    assert stored.results.count() == 2
    with CaptureQueriesContext(connection) as queries:
        upload(unix(2031, 3, 20), sha="b" * 40)
    ddl = [q["sql"] for q in queries if q["sql"].startswith(("CREATE", "ALTER", "LOCK"))]
    assert ddl == []
    assert set(homes().values()) == {"results_result_p2031_03", "results_result_p2031_04"}


def test_known_months_cost_no_query_once_committed(db, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        partitions.ensure_months(connection, [unix(2032, 1), unix(2032, 2, 1)])
    assert {("default", date(2032, 1, 1)), ("default", date(2032, 2, 1))} <= partitions.KNOWN
    with CaptureQueriesContext(connection) as queries:
        partitions.ensure_months(connection, [unix(2032, 1, 3), unix(2032, 2, 28)])
    assert len(queries) == 0


def test_making_a_month_moves_its_rows_out_of_default(db):
    first = upload(unix(2033, 5))
    run, series = Run.objects.get(), Series.objects.get()
    strays = [Result.objects.create(series=series, run=run, upload=first, values=[],
                                    timestamp=datetime(2033, 6, day, tzinfo=UTC)).pk
              for day in (1, 30)]
    other = Result.objects.create(series=series, run=run, upload=first, values=[],
                                  timestamp=datetime(2033, 7, 1, tzinfo=UTC)).pk
    assert {homes()[pk] for pk in [*strays, other]} == {"results_result_default"}

    upload(unix(2033, 6, 10), sha="c" * 40)  # June: made, its strays moved
    where = homes()
    assert {where[pk] for pk in strays} == {"results_result_p2033_06"}
    assert where[other] == "results_result_default"
    assert not partitions.create_month(connection, date(2033, 6, 1))  # exists: nothing


def test_deletes_through_the_orm_still_cascade(db):
    kept = upload(unix(2034, 1), sha="a" * 40)
    gone = upload(unix(2034, 2), sha="b" * 40)
    Result.objects.create(series=Series.objects.get(), run=gone.runs.get(), upload=gone,
                          values=[], timestamp=datetime(2034, 9, 1, tzinfo=UTC))  # DEFAULT
    assert delete_uploads([gone.pk]) == 1
    assert set(homes().values()) == {"results_result_p2034_01"}
    kept.runs.get().delete()
    assert not Result.objects.exists()
    upload(unix(2034, 1), sha="d" * 40)
    Series.objects.all().delete()
    assert not Result.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_two_makers_of_one_month_at_once_both_succeed():
    month = date(2035, 4, 1)
    barrier = threading.Barrier(2)
    made, errors = [], []

    def make(hold: bool):
        try:
            with transaction.atomic():
                barrier.wait()
                made.append(partitions.create_month(connection, month))
                if hold:  # the other maker now waits for this commit, then finds the table
                    threading.Event().wait(0.3)
        except Exception as error:  # noqa: BLE001 (reported below)
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=make, args=(hold,)) for hold in (True, False)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == [] and sorted(made) == [False, True]
        assert "results_result_p2035_04" in [p.name for p in partitions.partitions(connection)]
    finally:
        with connection.cursor() as cursor:  # not flushed between tests, unlike the rows
            cursor.execute("DROP TABLE IF EXISTS results_result_p2035_04")


def test_the_command_lists_partitions_and_makes_months(db, capsys):
    upload(unix(2036, 8))
    call_command("results_partitions", "--create", "2036-09", "--count")
    out = capsys.readouterr().out
    assert "results_result_p2036_08" in out and "results_result_p2036_09" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("results")}
    assert lines["results_result_p2036_08"].split()[1] == "1"
    assert "DEFAULT" in lines["results_result_default"]


def test_a_runs_and_a_commits_results_are_read_from_their_months_only(db):
    upload(unix(2037, 1))
    upload(unix(2037, 3), sha="b" * 40)
    upload(unix(2037, 5), sha="c" * 40)
    run = Run.objects.get(head_sha="b" * 40)
    assert read(Result.objects.of_run(run)) == {"results_result_p2037_03"}
    assert read(Result.objects.of_commits(META["repo"], ["a" * 40, "c" * 40])) == {
        "results_result_p2037_01", "results_result_p2037_05"}


def read(results) -> set[str]:
    """The partitions the query's plan reads."""
    return set(re.findall(r"results_result_(?:p\d{4}_\d\d|default)\b", results.explain()))


def id_types() -> dict[tuple[str, str], str]:
    """The types of the ids of runs, series and uploads and of the results' references."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT table_name, column_name, data_type FROM "
                       "information_schema.columns WHERE (table_name, column_name) IN ("
                       "('results_run', 'id'), ('results_series', 'id'), "
                       "('results_upload', 'id'), ('results_result', 'run_id'), "
                       "('results_result', 'series_id'), ('results_result', 'upload_id'))")
        return {(table, column): kind for table, column, kind in cursor}


@pytest.mark.django_db(transaction=True)
def test_0019_gives_runs_series_and_uploads_four_byte_ids_and_goes_back():
    stored = upload(unix(2026, 1)).pk
    try:
        migrate([("results", "0018_result_values_null")])
        assert set(id_types().values()) == {"bigint"}
        migrate([("results", "0019_int_ids")])
        assert set(id_types().values()) == {"integer"}
        assert Result.objects.filter(upload_id=stored).count() == 1
        later = upload(unix(2026, 2), sha="b" * 40)  # the id sequences go on
        assert later.pk > stored and Result.objects.filter(upload=later).count() == 1
    finally:
        migrate_to_latest()


def night(when: int, sha: str, models: list[str]) -> Upload:
    """One upload of a result a model at `when`, committed, the records in `models`' order."""
    body = orjson.dumps([record(**{**META, "timestamp": when, "head_sha": sha},
                                model={"name": name}) for name in models])
    with TestCase.captureOnCommitCallbacks(execute=True):
        return store_upload(body, announce=False).upload


def physical_order(name: str) -> list[tuple[int, datetime]]:
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT series_id, "timestamp" FROM {name} ORDER BY ctid')
        return cursor.fetchall()


def test_settled_months_are_rewritten_in_their_series_order_once(db, capsys):
    models = [f"m{n}" for n in range(12)]
    for day, sha in ((3, "a"), (12, "b"), (21, "c")):  # nights, each series' point once
        night(unix(2001, 1, day), sha * 40, models if day != 12 else models[::-1])
    night(unix(2001, 2, 20), "d" * 40, models)  # February: not settled on March 1st
    night(unix(2001, 2, 27), "e" * 40, models[::-1])
    before = physical_order("results_result_p2001_02")
    assert physical_order("results_result_p2001_01") != sorted(
        physical_order("results_result_p2001_01"))

    done = {month.name: month for month in partitions.order_months(
        connection, now=datetime(2001, 3, 1, 12, tzinfo=UTC))}
    january = done["results_result_p2001_01"]
    assert january.outcome == "ordered" and january.correlation < partitions.ORDERED
    assert january.rows == 36
    assert "results_result_p2001_02" not in done
    rows = physical_order("results_result_p2001_01")
    assert rows == sorted(rows) and len(rows) == 36
    assert physical_order("results_result_p2001_02") == before

    # Ordered, the month costs a look at its statistics; the command says so.
    with CaptureQueriesContext(connection) as queries:
        again = {month.name: month for month in partitions.order_months(
            connection, now=datetime(2001, 3, 1, 12, tzinfo=UTC))}
    assert again["results_result_p2001_01"].outcome == "in order"
    assert not [q for q in queries if q["sql"].startswith(("CLUSTER", "ANALYZE"))]
    call_command("results_partitions", "--order")
    err = capsys.readouterr().err
    assert "results_result_p2001_01: in order (series order 1.00)" in err
    assert "results_result_p2001_02: ordered 24 rows" in err  # settled by now


@pytest.mark.django_db(transaction=True)
def test_a_month_being_read_is_left_for_the_next_night_and_the_others_ordered():
    """A long read holds the month: ordering waits `lock_timeout` for it, then leaves it
    "busy" instead of queueing every later read of the month behind the rewrite."""
    models = [f"m{n}" for n in range(8)]
    for month in (4, 5):
        for day, sha in ((3, "a"), (12, "b")):
            night(unix(2039, month, day), f"{sha}{month}".ljust(40, "0"),
                  models if day == 3 else models[::-1])
    reading, release, errors = threading.Event(), threading.Event(), []

    def read_april():
        try:
            with transaction.atomic():
                list(Result.objects.filter(timestamp__lt=datetime(2039, 5, 1, tzinfo=UTC),
                                           timestamp__gte=datetime(2039, 4, 1, tzinfo=UTC)))
                reading.set()
                release.wait(10)
        except Exception as error:  # noqa: BLE001 (reported below)
            errors.append(error)
        finally:
            connections.close_all()

    reader = threading.Thread(target=read_april)
    try:
        reader.start()
        assert reading.wait(10)
        done = {month.name: month.outcome for month in partitions.order_months(
            connection, now=datetime(2039, 7, 1, tzinfo=UTC), lock_timeout=0.2)
            if "2039" in month.name}
        assert done == {"results_result_p2039_04": "busy", "results_result_p2039_05": "ordered"}
        release.set()
        reader.join()
        assert errors == []
        done = {month.name: month.outcome for month in partitions.order_months(
            connection, now=datetime(2039, 7, 1, tzinfo=UTC), lock_timeout=0.2)
            if "2039" in month.name}
        assert done == {"results_result_p2039_04": "ordered", "results_result_p2039_05": "in order"}
    finally:
        release.set()
        reader.join()
        with connection.cursor() as cursor:  # made in committed transactions: not flushed
            cursor.execute("DROP TABLE IF EXISTS results_result_p2039_04, "
                           "results_result_p2039_05")


def test_ordering_runs_nightly_on_the_control_queue():
    from django.conf import settings as django_settings

    from benchsite.celery import app
    from benchsite.results import tasks

    [entry] = [entry for entry in django_settings.CELERY_BEAT_SCHEDULE.values()
               if entry["task"] == "benchsite.results.tasks.order_months"]
    assert entry["schedule"].hour == {django_settings.BENCH_MAINTENANCE_HOUR}
    assert app.amqp.router.route({}, tasks.order_months.name)["queue"].name == \
        django_settings.BENCH_CONTROL_QUEUE
