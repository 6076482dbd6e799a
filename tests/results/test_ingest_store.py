"""Each database's store (COPY on PostgreSQL, the ORM elsewhere) writes the same rows: these
tests run on whichever database the suite runs on, and the suite runs on both."""

import gc
import json
import math

import pytest
from django.db import connection

from benchsite.results.ingest import UploadRefused, store_upload
from benchsite.results.ingest.normalize import ResultInfo, SeriesInfo, digest
from benchsite.results.ingest.store import CopyStore, OrmStore, store_for
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
    assert store.count_series([*ids.values(), 10**9]) == 2
    stored = Series.objects.get(identity=digest(AWKWARD))
    assert (stored.model, stored.suite, stored.extra_info) == (
        AWKWARD, "torchao", {"benchmark": {"note": AWKWARD}})


def test_results_keep_every_value_as_given(db, store):
    upload = Upload.objects.create(content_hash="h", payload_gzip=b"")
    run = Run.objects.create(identity="r", repo="pytorch/ao", head_branch="main",
                             head_sha="s", timestamp="2026-01-01T00:00:00Z",
                             last_timestamp="2026-01-01T00:00:00Z", upload=upload)
    identity = digest("m")
    store.insert_series({identity: series_info("m")})
    series_ids = store.ids_by_identity(Series, [identity])
    meanwhile = store.insert_results(upload.pk, [
        ResultInfo(run="r", series=identity, timestamp=1_760_000_000,
                   values=[1.5, math.inf, math.nan], value=1.5, target=None,
                   string_values=None, extra_info={"unit": AWKWARD}, unknown=None),
        ResultInfo(run="r", series=identity, timestamp=1_760_000_001, values=[],
                   value=None, target=2.0, string_values=["pass"], extra_info=None,
                   unknown={"notes": AWKWARD}),
    ], {"r": run.pk}, series_ids, meanwhile=lambda: "worked out meanwhile")
    assert meanwhile == "worked out meanwhile"
    first, second = Result.objects.order_by("timestamp")
    assert first.values[:2] == [1.5, math.inf] and math.isnan(first.values[2])
    assert (first.value, first.extra_info, first.timestamp.timestamp()) == (
        1.5, {"unit": AWKWARD}, 1_760_000_000)
    assert (second.value, second.target, second.string_values, second.unknown) == (
        None, 2.0, ["pass"], {"notes": AWKWARD})


def test_statistics_can_be_refreshed_after_a_bulk_load(transactional_db, store):
    store.refresh_statistics()  # VACUUM cannot run inside a transaction: hence this fixture
    store.refresh_statistics(vacuum=True)


def test_an_upload_is_stored_with_the_cyclic_collector_paused_and_resumed_after(db, monkeypatch):
    seen = []
    original = type(store_for(connection)).insert_results

    def insert_results(self, *args, **kwargs):
        seen.append(gc.isenabled())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(store_for(connection)), "insert_results", insert_results)
    assert gc.isenabled()
    good = record(TORCHAO, metric={"name": "Fwd Speedup (x)", "benchmark_values": [1.5]})
    store_upload(json.dumps([good]).encode(), metadata=META)
    assert seen == [False] and gc.isenabled()
    with pytest.raises(UploadRefused):
        store_upload(json.dumps([good, {"benchmark": 1}]).encode(), metadata=META)
    assert gc.isenabled()  # resumed after a refused upload too
