"""The fast path for well-formed uploads: a JSON list of canonical v3 records, decoded and
type-checked in C by msgspec instead of building dicts and checking them in Python.

It accepts only what `v3.normalize` accepts unchanged: no unknown fields, numbers as JSON
numbers, text within its limits. Anything else (writers' quirks, errors, other body shapes)
returns None, and the caller takes `v3.parse_body` + `v3.normalize`, which accepts the quirks
and explains every problem. Both end in `_Normalizer.add`, so both store the same thing
(tests/results/test_v3_fast.py checks this on every sample).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

import msgspec

from benchsite.results import v3

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=v3.MAX_TEXT)]
Text = Annotated[str, msgspec.Meta(max_length=v3.MAX_TEXT)] | None
Extra = dict[str, Any] | None
RunField = str | int | float | None  # checked by v3._run_meta, once per distinct value
NULL = msgspec.Raw(b"null")


class _Part(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    pass


class Benchmark(_Part):
    name: Name
    mode: Text = None
    dtype: Text = None
    extra_info: Extra = None


class Model(_Part):
    name: Name
    type: Text = None
    backend: Text = None
    origins: list[str] | None = None
    extra_info: Extra = None


class Metric(_Part):
    name: Name
    type: Any = None
    benchmark_values: list[float] | None = None
    target_value: float | None = None
    extra_info: Extra = None


class Record(_Part):
    """The parts that identify a series or run stay raw JSON text: a series seen before is
    recognised by its bytes, and only new ones are decoded with the types above."""

    benchmark: msgspec.Raw
    model: msgspec.Raw
    metric: Metric
    repo: RunField = None
    head_branch: RunField = None
    head_sha: RunField = None
    workflow_id: RunField = None
    run_attempt: RunField = None
    job_id: RunField = None
    name: RunField = None
    timestamp: RunField = None
    servicelab_experiment_id: Any = msgspec.UNSET
    servicelab_trial_id: Any = msgspec.UNSET
    schema_version: Any = msgspec.UNSET
    inputs: msgspec.Raw = NULL
    runners: msgspec.Raw = NULL
    dependencies: msgspec.Raw = NULL


_DECODER = msgspec.json.Decoder(list[Record])
_BENCHMARK = msgspec.json.Decoder(Benchmark)
_MODEL = msgspec.json.Decoder(Model)
_EXTRA = msgspec.json.Decoder(Extra)
_RUNNERS = msgspec.json.Decoder(list[dict[str, Any]] | None)
_RUN_FIELDS = v3.RUN_FIELDS
_OPTIONAL = v3.OPTIONAL_RUN_FIELDS
_run_fields = operator.attrgetter(*_RUN_FIELDS)
_optional_fields = operator.attrgetter(*_OPTIONAL)
_NO_RUN_FIELDS = (None,) * len(_RUN_FIELDS)
_NO_OPTIONAL_FIELDS = (msgspec.UNSET,) * len(_OPTIONAL)


class _SeriesCache:
    """Series identities by the raw text that determines them, kept across uploads (the same
    series come back with every commit); emptied when full."""

    def __init__(self, limit: int = 100_000):
        self.limit = limit
        self.items: dict[tuple, tuple[str, v3.SeriesInfo]] = {}

    def put(self, key: tuple, identity: str, series: v3.SeriesInfo) -> None:
        if len(self.items) >= self.limit:
            self.items.clear()
        self.items[key] = (identity, series)


SERIES_CACHE = _SeriesCache()


def normalize(body: bytes, metadata: dict[str, Any]) -> v3.Batch | None:
    """The batch of a well-formed list of records; None when the slow path must decide."""
    try:
        records = _DECODER.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if not records:
        return None
    normalizer = v3._Normalizer(metadata)
    batch = normalizer.batch
    results = batch.results
    known_series = SERIES_CACHE.items
    runs: dict[tuple, str] = {}
    no_problems = v3._Problems("")
    for record in records:
        given = _run_fields(record)
        key = () if given == _NO_RUN_FIELDS else given
        fields = {} if key in normalizer.meta_cache else dict(zip(_RUN_FIELDS, given,
                                                                  strict=True))
        meta = normalizer.meta_for(key, fields, no_problems)
        metric = record.metric
        metric_extra = metric.extra_info or {}
        string_values = None
        if "benchmark_values" in metric_extra:
            string_values = v3._strings(metric_extra["benchmark_values"], no_problems)
            metric_extra = {k: v for k, v in metric_extra.items() if k != "benchmark_values"}
        values = metric.benchmark_values or []
        if no_problems.items or (not values and not string_values):
            return None
        optional = _optional_fields(record)
        run_extra = {} if optional == _NO_OPTIONAL_FIELDS else {
            field: value for field, value in zip(_OPTIONAL, optional, strict=True)
            if value is not msgspec.UNSET}
        runners = bytes(record.runners)
        run_key = (key, runners, bytes(record.dependencies), *run_extra.items())
        series_key = (meta["repo"], bytes(record.benchmark), bytes(record.model),
                      bytes(record.inputs), runners, metric.name)
        run = runs.get(run_key)
        series = known_series.get(series_key)
        if run is None or series is None:
            result = _decoded(record, normalizer, meta, run_extra, metric_extra, values,
                              string_values)
            if result is None:
                return None
            runs[run_key] = result.run
            SERIES_CACHE.put(series_key, result.series, batch.series[result.series])
        else:
            batch.series.setdefault(series[0], series[1])
            result = v3.ResultInfo(
                run=run, series=series[0], timestamp=meta["timestamp"], values=values,
                value=v3.aggregate(values), target=metric.target_value or None,
                string_values=string_values or None, extra_info=metric_extra or None,
                unknown=None)
        results.append(result)
    return batch


def _decoded(record: Record, normalizer: v3._Normalizer, meta: dict, run_extra: dict,
             metric_extra: dict, values: list[float],
             string_values: list[str] | None) -> v3.ResultInfo | None:
    """The result of a record whose raw parts are new: decoded, checked and identified."""
    try:
        benchmark = _BENCHMARK.decode(record.benchmark)
        model = _MODEL.decode(record.model)
        inputs = _EXTRA.decode(record.inputs)
        runners = _RUNNERS.decode(record.runners)
        dependencies = _EXTRA.decode(record.dependencies)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    metric = record.metric
    return normalizer.add(
        meta, runners or [], dependencies or {}, run_extra, benchmark.name,
        benchmark.mode or "", benchmark.dtype or "", benchmark.extra_info or {}, model.name,
        model.type or "", model.backend or "", model.origins or [], model.extra_info or {},
        inputs or {}, metric.name, metric_extra, values, string_values, metric.target_value,
        None,
    )
