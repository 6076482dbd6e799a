"""Each database's store (COPY on PostgreSQL, the ORM elsewhere) writes the same rows: these
tests run on whichever database the suite runs on, and the suite runs on both."""

import gc
import json
import math
import re

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from benchsite.results.ingest import UploadRefused, mixed, store_upload
from benchsite.results.ingest import store as store_module
from benchsite.results.ingest.normalize import ResultInfo, SeriesInfo, digest
from benchsite.results.ingest.store import CopyStore, OrmStore, Store, store_for
from benchsite.results.models import Result, Run, Series, Upload
from tests.results.samples import META, TORCHAO, record

AWKWARD = 'tab\there, newline\nthere, back\\slash and "quotes"'


def series_info(model: str) -> SeriesInfo:
    return SeriesInfo("pytorch/ao", "b", "", "", model, "", "", ["torchao"], "cuda", "H100",
                      "latency", {"benchmark": {"note": AWKWARD}}, "")


@pytest.fixture
def store():
    return store_for(connection)


def test_the_store_is_chosen_by_the_database():
    expected = CopyStore if connection.vendor == "postgresql" else OrmStore
    assert type(store_for(connection)) is expected


def test_new_series_are_inserted_once_and_found_by_identity(db, store):
    items = {digest(model): series_info(model) for model in ("m1", AWKWARD)}
    store.insert_series(items)
    store.insert_series(items)  # as a concurrent upload would: conflicts are skipped
    ids = store.ids_by_identity(Series, [*items, "unknown"])
    assert set(ids) == set(items)
    stored = Series.objects.get(identity=digest(AWKWARD))
    assert (stored.model, stored.suite, stored.extra_info) == (
        AWKWARD, "torchao", {"benchmark": {"note": AWKWARD}})


def test_the_cache_token_changes_when_series_may_have_gone(transactional_db, store):
    if connection.vendor != "postgresql":
        assert store.cache_token() is None  # SQLite: no series id is cached
        return
    with transaction.atomic():  # as in an upload's transaction
        store.insert_series({digest(model): series_info(model) for model in ("m1", "m2")})
    token = store.cache_token()
    with transaction.atomic():
        store.insert_series({digest("m3"): series_info("m3")})
    assert store.cache_token() == token  # new series leave cached ids true
    Series.objects.filter(model="m1").delete()
    deleted = store.cache_token()
    assert deleted != token
    with connection.cursor() as cursor:  # what a flushed or restored database does
        cursor.execute("TRUNCATE results_series CASCADE")
    assert store.cache_token() not in (token, deleted)


def test_results_keep_every_value_as_given(db, store):
    upload = Upload.objects.create(content_hash="h", payload_gzip=b"")
    run = Run.objects.create(identity="r", repo="pytorch/ao", head_branch="main",
                             head_sha="s", timestamp="2026-01-01T00:00:00Z",
                             last_timestamp="2026-01-01T00:00:00Z", upload=upload)
    identity = digest("m")
    store.insert_series({identity: series_info("m")})
    series_ids = store.ids_by_identity(Series, [identity])
    with store.writer(upload.pk, {"r": run.pk}, series_ids) as writer:
        writer.write([
            ResultInfo(run="r", series=identity, timestamp=1_760_000_000,
                       values=[1.5, math.inf, math.nan], value=1.5, target=None,
                       string_values=None, extra_info={"unit": AWKWARD}, unknown=None)])
        writer.pause()  # a lookup between two chunks, as a new series brings
        assert Result.objects.count() == 1
        writer.write([
            ResultInfo(run="r", series=identity, timestamp=1_760_000_001, values=[],
                       value=None, target=2.0, string_values=["pass"], extra_info=None,
                       unknown={"notes": AWKWARD})])
        writer.write([  # one repetition; one that is NaN (no median)
            ResultInfo(run="r", series=identity, timestamp=1_760_000_002 + index,
                       values=[value], value=median, target=None, string_values=None,
                       extra_info=None, unknown=None)
            for index, (value, median) in enumerate([(-2.5, -2.5), (math.nan, None)])])
        meanwhile = writer.finish(meanwhile=lambda: "worked out meanwhile")
    assert meanwhile == "worked out meanwhile"
    first, second, one, nan = Result.objects.order_by("timestamp")
    assert first.values[:2] == [1.5, math.inf] and math.isnan(first.values[2])
    assert (first.value, first.extra_info, first.timestamp.timestamp()) == (
        1.5, {"unit": AWKWARD}, 1_760_000_000)
    assert (second.value, second.target, second.string_values, second.unknown) == (
        None, 2.0, ["pass"], {"notes": AWKWARD})
    # No repetition, or one that is the value, is stored as null and read back as given.
    assert (second.values, second.repetitions) == (None, [])
    assert (one.values, one.repetitions, one.value) == (None, [-2.5], -2.5)
    assert nan.value is None and math.isnan(nan.values[0]) and len(nan.repetitions) == 1


def test_statistics_can_be_refreshed_after_a_bulk_load(transactional_db, store):
    store.refresh_statistics()  # VACUUM cannot run inside a transaction: hence this fixture
    store.refresh_statistics(vacuum=True)


def test_an_upload_is_stored_with_the_cyclic_collector_paused_and_resumed_after(db, monkeypatch):
    seen = []
    original = Store.save

    def save(self, *args, **kwargs):
        seen.append(gc.isenabled())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Store, "save", save)
    assert gc.isenabled()
    good = record(TORCHAO, metric={"name": "Fwd Speedup (x)", "benchmark_values": [1.5]})
    store_upload(json.dumps([good]).encode(), metadata=META)
    assert seen == [False] and gc.isenabled()
    with pytest.raises(UploadRefused):
        store_upload(json.dumps([good, {"benchmark": 1}]).encode(), metadata=META)
    assert gc.isenabled()  # resumed after a refused upload too


def many(count: int, model: str = "m", **fields) -> bytes:
    return json.dumps([record(TORCHAO, **fields, model={"name": f"{model}{index}"},
                              metric={"name": "speedup", "benchmark_values": [index + 0.5]})
                       for index in range(count)]).encode()


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 3 results, so that a few records take the paths of a large upload."""
    monkeypatch.setattr(mixed, "CHUNK", 3)


def stored_values() -> dict[str, float]:
    return dict(Result.objects.values_list("series__model", "value"))


def test_chunks_of_new_and_known_series_store_every_result_once(
        db, small_chunks, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):  # the series ids cached
        first = store_upload(many(10), metadata=META).upload
    assert first.record_count == 10 and Result.objects.count() == 10
    # Known series (cached ids) and, in a later chunk, new ones: the chunks with new series
    # are held back and written after one lookup at the end.
    metadata = {**META, "head_sha": "b" * 40}
    second = store_upload(many(7), metadata=metadata).upload
    third = store_upload(json.dumps(json.loads(many(10)) + json.loads(many(5, model="n")))
                         .encode(), metadata={**META, "head_sha": "c" * 40}).upload
    assert (second.record_count, third.record_count) == (7, 15)
    assert Series.objects.count() == 15
    assert Result.objects.filter(upload=third).count() == 15
    assert dict(Result.objects.filter(upload=third).values_list("series__model", "value")) == {
        **{f"m{index}": index + 0.5 for index in range(10)},
        **{f"n{index}": index + 0.5 for index in range(5)}}
    assert Run.objects.get(head_sha="c" * 40).result_count == 15


def test_a_bad_record_in_a_late_chunk_stores_nothing(db, small_chunks, monkeypatch):
    records = json.loads(many(10))
    records[8]["metric"]["benchmark_values"] = ["fast"]
    made = []
    kind = type(store_for(connection))
    insert_series = kind.insert_series
    monkeypatch.setattr(kind, "insert_series",
                        lambda self, items: made.append(len(items)) or insert_series(self, items))
    with pytest.raises(UploadRefused) as refused:
        store_upload(json.dumps(records).encode(), metadata=META)
    assert refused.value.errors[0] == (
        "records[8].metric.benchmark_values[0]: expected a number, got a string 'fast'")
    # The first chunk's series were made; the second chunk's (held back for new series)
    # were not, once the third's bad record refused the upload.
    assert made == [3]
    assert (Upload.objects.count(), Run.objects.count(), Series.objects.count(),
            Result.objects.count()) == (0, 0, 0, 0)


def test_chunks_stop_at_the_first_problem_or_refusal_but_every_problem_is_listed(monkeypatch):
    monkeypatch.setattr(mixed, "CHUNK", 2)
    records = [json.dumps(record(TORCHAO, model={"name": f"m{index}"},
                                 metric={"name": "x", "benchmark_values": [1.0]},
                                 **({"repo": "other/repo"} if index >= 4 else {})))
               .encode() for index in range(8)]
    records[6] = b'{"benchmark": 1}'
    normalization = mixed.Normalization(records, dict(META))
    admitted = lambda batch: batch.repos == {"pytorch/ao"}  # noqa: E731
    chunks = [len(chunk) for chunk in normalization.chunks(admit=admitted)]
    assert chunks == [2, 2]  # the third chunk brings another repo
    assert len(normalization.batch.results) == 7 and normalization.count >= 1
    assert any(error.startswith("records[6]") for error in normalization.errors)


def test_a_new_process_reads_a_repos_series_ids_at_once(
        db, small_chunks, django_capture_on_commit_callbacks):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite caches no series ids (nothing to read ahead)")
    with django_capture_on_commit_callbacks(execute=True):
        store_upload(many(10), metadata=META)
    store_module.SERIES_IDS.clear()  # as in a new worker process
    store_module.PRELOADED.clear()
    with CaptureQueriesContext(connection) as queries:
        upload = store_upload(many(10), metadata={**META, "head_sha": "b" * 40}).upload
    series_reads = [q["sql"] for q in queries if re.search(r'\bresults_series\b', q["sql"])
                    and "results_series_deletions" not in q["sql"]]  # but the cache token
    # One read of the repo's series: no chunk waited for a lookup of its series.
    assert len(series_reads) == 1 and '"results_series"."repo" =' in series_reads[0]
    assert Result.objects.filter(upload=upload).count() == 10
    assert ("default", Series.objects.get(model="m3").identity) in store_module.SERIES_IDS


def test_a_failing_statement_after_the_results_undoes_the_whole_upload(db, monkeypatch):
    """The statements after the results are sent without waiting (a pipeline on PostgreSQL):
    one that fails raises as Django's error, and nothing of the upload stays."""
    def failing_rows(rows):
        with connection.cursor() as cursor:
            cursor.execute("UPDATE results_run SET result_count = -1")  # its CHECK refuses

    monkeypatch.setattr(store_module, "add_rows", failing_rows)
    with pytest.raises(IntegrityError):
        store_upload(json.dumps([TORCHAO]).encode(), metadata=META)
    assert not Upload.objects.exists() and not Result.objects.exists()
    assert not Run.objects.exists()


def test_an_error_of_the_last_batched_statement_raises_as_djangos(db, store):
    store_upload(json.dumps([TORCHAO]).encode(), metadata=META)
    with (pytest.raises(IntegrityError), transaction.atomic(), store.batched(),
          connection.cursor() as cursor):
        cursor.execute("UPDATE results_run SET result_count = -1")
