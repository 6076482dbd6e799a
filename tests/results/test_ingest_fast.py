"""The fast path stores exactly what the general path stores, and declines everything else;
both know the same fields, the contract's."""

import copy
import json

import orjson
import pytest

from benchsite.caching import ProcessCache
from benchsite.results.ingest import fast, parse
from benchsite.results.ingest.normalize import Batch, Normalizer
from runner.contract import record as contract
from tests.results import samples

CANONICAL = [
    samples.TORCHAO,
    samples.INDUCTOR_ACCURACY,
    {**samples.VLLM, "metric": {**samples.VLLM["metric"], "benchmark_values": [11.0, 12.5]}},
    {"benchmark": {"name": "b", "mode": "", "extra_info": {}}, "model": {"name": "m"},
     "metric": {"name": "latency", "benchmark_values": [1, 2, 3]}, "inputs": {"x": [1, 2]},
     "runners": [{"name": "cpu", "cpu_info": "Xeon"}], "schema_version": "v3"},
    {**samples.TORCHAO, **samples.META},
    {**samples.TORCHAO, "repo": "pytorch/pytorch", "timestamp": "2026-11-21T03:00:00Z"},
]
QUIRKS = {
    "string numbers": samples.VLLM,
    "a bare number": samples.MINIMAL,
    "an unknown field": {**samples.TORCHAO, "notes": "kept in unknown"},
    "the name under type": {**samples.TORCHAO, "metric": {"type": "latency",
                                                          "benchmark_values": [1.0]}},
    "origins as a string": {**samples.TORCHAO, "model": {"name": "m", "origins": "torchao"}},
    "a missing name": {**samples.TORCHAO, "model": {"type": "layer"}},
    "no values": {**samples.TORCHAO, "metric": {"name": "x", "benchmark_values": []}},
    "a bad repo": {**samples.TORCHAO, "repo": "no-slash"},
    "a metric's extra_info not an object": {
        **samples.TORCHAO, "metric": {"name": "x", "benchmark_values": [1.0], "extra_info": [1]}},
    "an integer beyond 64 bits in a metric's extra_info": {
        **samples.TORCHAO, "metric": {"name": "x", "benchmark_values": [1.0],
                                      "extra_info": {"n": 2**70}}},
}
PARTS = {"benchmark": contract.Benchmark, "model": contract.Model, "metric": contract.Metric}


def general(body: bytes, metadata: dict) -> tuple[Batch, list[str]]:
    records = [parse.decode_record(record) for record in parse.split_body(body)[0]]
    return parse.normalize(records, metadata)


def fast_only(body: bytes, metadata: dict) -> Batch | None:
    """The fast path alone over a body: its batch, or None when it refuses any record."""
    try:
        records = list(parse.split_body(body)[0])
    except parse.BodyError:
        return None
    path = fast.FastPath(Normalizer(metadata))
    for record in records:
        text = isinstance(record, parse.Text) and b"\\u0000" not in body
        result = path.decode(record) if text else None
        if result is None:
            return None
        path.batch.results.append(result)
    return path.batch if records else None


@pytest.mark.parametrize("warm", [False, True])
def test_canonical_records_take_the_fast_path_with_the_same_result(warm):
    fast.SERIES_CACHE.clear()
    body = orjson.dumps([copy.deepcopy(record) for record in CANONICAL])
    metadata = {**samples.META, "timestamp": 1_760_000_000}
    if warm:
        fast_only(body, metadata)
    batch = fast_only(body, metadata)
    expected, errors = general(body, metadata)
    assert not errors
    assert batch == expected
    assert len(batch.results) == len(CANONICAL)


@pytest.mark.parametrize("quirk", QUIRKS)
def test_quirks_and_errors_are_left_to_the_general_path(quirk):
    body = json.dumps([samples.TORCHAO, QUIRKS[quirk]]).encode()  # orjson: 64-bit integers
    assert fast_only(body, samples.META) is None


@pytest.mark.parametrize("body", [b'{"benchmark": {}}', b"[]", b"[1]", b"[NaN]", b"not json",
                                  b'{"metadata": {}, "records": []}'])
def test_other_body_shapes_are_left_to_the_general_path(body):
    assert fast_only(body, samples.META) is None


def test_a_cached_series_is_told_apart_by_repo_and_by_its_bytes():
    fast.SERIES_CACHE.clear()
    metadata = {**samples.META}
    first = fast_only(orjson.dumps([samples.TORCHAO]), metadata)
    other_repo = fast_only(orjson.dumps([samples.TORCHAO]),
                                {**metadata, "repo": "pytorch/pytorch"})
    changed = copy.deepcopy(samples.TORCHAO)
    changed["benchmark"]["extra_info"]["torch_compile_mode"] = "default"
    other_mode = fast_only(orjson.dumps([changed]), metadata)
    identities = {batch.results[0].series for batch in (first, other_repo, other_mode)}
    assert len(identities) == 3
    assert other_mode.series[other_mode.results[0].series].compile_mode == "default"


def test_the_series_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(fast, "SERIES_CACHE", ProcessCache(maxsize=2))
    fast_only(orjson.dumps(CANONICAL[:3]), samples.META)
    assert 1 <= len(fast.SERIES_CACHE) <= 2


def test_the_fast_paths_record_has_exactly_the_contracts_fields():
    assert fast.RawRecord.__struct_fields__ == contract.Record.__struct_fields__
    assert fast.RawMetric.__struct_fields__ == contract.Metric.__struct_fields__


def test_a_metric_text_is_decoded_once_and_its_string_results_every_time():
    """Records with one metric extra_info text share its dict (equal to the general path's);
    string results are read record by record, never cached."""
    fast.METRIC_EXTRAS.clear()
    records = [record for value in ("pass", "fail_accuracy") for record in (
        {**samples.TORCHAO, "model": {"name": f"m-{value}"},
         "metric": {"name": "x", "benchmark_values": [1.0], "extra_info": {"unit": "ms"}}},
        {**samples.INDUCTOR_ACCURACY, "model": {"name": f"m-{value}"},
         "metric": {"name": "accuracy", "extra_info": {"benchmark_values": [value]}}})]
    body = orjson.dumps(records)
    batch = fast_only(body, samples.META)
    assert batch == general(body, samples.META)[0]
    units = [result.extra_info for result in batch.results[::2]]
    assert units == [{"unit": "ms"}] * 2 and units[0] is units[1]
    assert [result.string_values for result in batch.results[1::2]] == [
        ["pass"], ["fail_accuracy"]]
    assert len(fast.METRIC_EXTRAS) == 1


def test_the_general_path_knows_the_fields_the_fast_path_decodes():
    assert set(fast.RawRecord.__struct_fields__) == parse.KNOWN_TOP
    assert set(contract.Benchmark.__struct_fields__) == parse.KNOWN_BENCHMARK
    assert set(contract.Model.__struct_fields__) == parse.KNOWN_MODEL
    assert set(contract.Metric.__struct_fields__) == parse.KNOWN_METRIC


@pytest.mark.parametrize("part", PARTS)
def test_the_general_path_keeps_as_unknown_only_what_the_structs_do_not_name(part):
    fields = {name: "x" for name in PARTS[part].__struct_fields__}
    record = {**samples.TORCHAO, part: {**samples.TORCHAO[part], **fields, "notes": "n"},
              "comment": "c"}
    unknown = parse.unknown_fields(record, record["benchmark"], record["model"],
                                   record["metric"])
    assert unknown == {"comment": "c", f"{part}.notes": "n"}


def test_every_top_level_field_of_the_struct_is_known_to_the_general_path():
    record = {name: None for name in contract.Record.__struct_fields__}
    assert parse.unknown_fields(record, {}, {}, {}) is None
