"""The fast path stores exactly what the general path stores, and declines everything else."""

import copy

import orjson
import pytest

from benchsite.results import v3, v3_fast
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
}


def general(body: bytes, metadata: dict) -> tuple[v3.Batch, list[str]]:
    return v3.normalize(v3.parse_body(body)[0], metadata)


@pytest.mark.parametrize("warm", [False, True])
def test_canonical_records_take_the_fast_path_with_the_same_result(warm):
    v3_fast.SERIES_CACHE.items.clear()
    body = orjson.dumps([copy.deepcopy(record) for record in CANONICAL])
    metadata = {**samples.META, "timestamp": 1_760_000_000}
    if warm:
        v3_fast.normalize(body, metadata)
    fast = v3_fast.normalize(body, metadata)
    expected, errors = general(body, metadata)
    assert not errors
    assert fast == expected
    assert len(fast.results) == len(CANONICAL)


@pytest.mark.parametrize("quirk", QUIRKS)
def test_quirks_and_errors_are_left_to_the_general_path(quirk):
    body = orjson.dumps([samples.TORCHAO, QUIRKS[quirk]])
    assert v3_fast.normalize(body, samples.META) is None


@pytest.mark.parametrize("body", [b'{"benchmark": {}}', b"[]", b"[1]", b"[NaN]", b"not json",
                                  b'{"metadata": {}, "records": []}'])
def test_other_body_shapes_are_left_to_the_general_path(body):
    assert v3_fast.normalize(body, samples.META) is None


def test_a_cached_series_is_told_apart_by_repo_and_by_its_bytes():
    v3_fast.SERIES_CACHE.items.clear()
    metadata = {**samples.META}
    first = v3_fast.normalize(orjson.dumps([samples.TORCHAO]), metadata)
    other_repo = v3_fast.normalize(orjson.dumps([samples.TORCHAO]),
                                   {**metadata, "repo": "pytorch/pytorch"})
    changed = copy.deepcopy(samples.TORCHAO)
    changed["benchmark"]["extra_info"]["torch_compile_mode"] = "default"
    other_mode = v3_fast.normalize(orjson.dumps([changed]), metadata)
    identities = {batch.results[0].series for batch in (first, other_repo, other_mode)}
    assert len(identities) == 3
    assert other_mode.series[other_mode.results[0].series].compile_mode == "default"


def test_the_cache_is_emptied_when_full(monkeypatch):
    monkeypatch.setattr(v3_fast.SERIES_CACHE, "limit", 2)
    v3_fast.SERIES_CACHE.items.clear()
    records = [record for record in CANONICAL[:3]]
    v3_fast.normalize(orjson.dumps(records), samples.META)
    assert len(v3_fast.SERIES_CACHE.items) <= 2
