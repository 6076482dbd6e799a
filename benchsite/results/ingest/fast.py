"""The fast path for well-formed uploads: a JSON list of canonical v3 records, decoded and
type-checked in C by msgspec with the contract's Structs instead of building dicts and
checking them in Python. Imports no Django.

It accepts only what `parse.normalize` accepts unchanged: no unknown fields, numbers as JSON
numbers, text within its limits. Anything else (writers' quirks, errors, other body shapes)
returns None, and the caller takes `parse`, which accepts the quirks and explains every
problem. Both end in `Normalizer.add`, so both store the same thing
(tests/results/test_ingest_fast.py checks this on every sample).
"""

from __future__ import annotations

import operator
from typing import Any

import msgspec
import orjson

from benchsite.caching import ProcessCache
from benchsite.results.ingest import checks
from benchsite.results.ingest.checks import Problems
from benchsite.results.ingest.normalize import (
    Batch,
    Normalizer,
    RecordFields,
    ResultInfo,
    aggregate,
)
from runner.contract.record import (
    OPTIONAL_RUN_FIELDS,
    RUN_FIELDS,
    Benchmark,
    Extra,
    Model,
    Record,
)

NULL = msgspec.Raw(b"null")
_SEPARATOR = b"\0"


# The parts that identify a series or run stay raw JSON text: a series seen before is
# recognised by its bytes, and only new ones are decoded with the contract's Structs.
RAW_PARTS = ("benchmark", "model", "inputs", "runners", "dependencies")


def _raw_field(field: msgspec.structs.FieldInfo) -> tuple:
    kind = msgspec.Raw if field.name in RAW_PARTS else field.type
    if field.required:
        return (field.name, kind)
    return (field.name, kind, NULL if field.name in RAW_PARTS else field.default)


# The contract's `Record`, field for field, with RAW_PARTS left undecoded.
RawRecord = msgspec.defstruct("RawRecord", [_raw_field(f) for f in msgspec.structs.fields(Record)],
                              forbid_unknown_fields=True, gc=False)


_DECODER = msgspec.json.Decoder(list[RawRecord])
_BENCHMARK = msgspec.json.Decoder(Benchmark)
_MODEL = msgspec.json.Decoder(Model)
_EXTRA = msgspec.json.Decoder(Extra)
_RUNNERS = msgspec.json.Decoder(list[dict[str, Any]] | None)
_run_fields = operator.attrgetter(*RUN_FIELDS)
_optional_fields = operator.attrgetter(*OPTIONAL_RUN_FIELDS)
_NO_RUN_FIELDS = (None,) * len(RUN_FIELDS)
_NO_OPTIONAL_FIELDS = (msgspec.UNSET,) * len(OPTIONAL_RUN_FIELDS)

# (series identity, SeriesInfo) by the raw text that determines them, kept across uploads
# (the same series come back with every commit).
SERIES_CACHE = ProcessCache(maxsize=100_000)


def normalize(body: bytes, metadata: dict[str, Any]) -> Batch | None:
    """The batch of a well-formed list of records; None when the general path must decide,
    which it also does for what no column can hold (`checks.storable`): text with a NUL
    character, an integer beyond 64 bits or nesting orjson cannot write (lone surrogates
    msgspec refuses itself)."""
    if b"\\u0000" in body:
        return None
    try:
        batch = _normalize(body, metadata)
        if batch is not None:  # what no digest of a run or series has written yet
            orjson.dumps(([result.extra_info for result in batch.results],
                          [run.runners for run in batch.runs.values()]))
    except orjson.JSONEncodeError:
        return None
    return batch


def _normalize(body: bytes, metadata: dict[str, Any]) -> Batch | None:
    try:
        records = _DECODER.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    if not records:
        return None
    normalizer = Normalizer(metadata)
    batch = normalizer.batch
    results = batch.results
    runs: dict[tuple, str] = {}
    no_problems = Problems("")
    key = meta = None
    for record in records:
        given = _run_fields(record)
        if given != key:  # most records share their run fields with the previous one
            key = given
            meta = normalizer.meta_for(() if given == _NO_RUN_FIELDS else given,
                                       dict(zip(RUN_FIELDS, given, strict=True)), no_problems)
        metric = record.metric
        metric_extra = metric.extra_info or {}
        string_values = None
        if "benchmark_values" in metric_extra:
            string_values = checks.strings(metric_extra["benchmark_values"], no_problems)
            metric_extra = {k: v for k, v in metric_extra.items() if k != "benchmark_values"}
        values = metric.benchmark_values or []
        if no_problems.items or (not values and not string_values):
            return None
        optional = _optional_fields(record)
        run_extra = {} if optional == _NO_OPTIONAL_FIELDS else {
            name: value for name, value in zip(OPTIONAL_RUN_FIELDS, optional, strict=True)
            if value is not msgspec.UNSET}
        # Raw JSON text never holds a NUL byte: joined with one, the parts stay apart (and
        # one bytes object hashes once, however often the caches look it up).
        run_key = (key, _SEPARATOR.join((record.runners, record.dependencies)),
                   *run_extra.items())
        series_key = (meta["repo"], metric.name, _SEPARATOR.join((
            record.benchmark, record.model, record.inputs, record.runners)))
        run = runs.get(run_key)
        series = SERIES_CACHE.get(series_key)
        if run is None or series is None:
            result = _decoded(record, normalizer, meta, run_extra, metric_extra, values,
                              string_values)
            if result is None:
                return None
            runs[run_key] = result.run
            SERIES_CACHE.put(series_key, (result.series, batch.series[result.series]))
        else:
            batch.series.setdefault(series[0], series[1])
            result = ResultInfo(
                run=run, series=series[0], timestamp=meta["timestamp"], values=values,
                value=aggregate(values), target=metric.target_value or None,
                string_values=string_values or None, extra_info=metric_extra or None,
                unknown=None)
        results.append(result)
    return batch


def _decoded(record: RawRecord, normalizer: Normalizer, meta: dict, run_extra: dict,
             metric_extra: dict, values: list[float],
             string_values: list[str] | None) -> ResultInfo | None:
    """The result of a record whose raw parts are new: decoded, checked and identified."""
    try:
        benchmark = _BENCHMARK.decode(record.benchmark)
        model = _MODEL.decode(record.model)
        inputs = _EXTRA.decode(record.inputs)
        runners = _RUNNERS.decode(record.runners)
        dependencies = _EXTRA.decode(record.dependencies)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    metric = record.metric
    return normalizer.add(RecordFields(
        meta=meta, runners=runners or [], dependencies=dependencies or {},
        run_extra=run_extra, benchmark=benchmark.name, mode=benchmark.mode or "",
        dtype=benchmark.dtype or "", benchmark_extra=benchmark.extra_info or {},
        model=model.name, model_type=model.type or "", backend=model.backend or "",
        origins=model.origins or [], model_extra=model.extra_info or {}, inputs=inputs or {},
        metric=metric.name, metric_extra=metric_extra, values=values,
        string_values=string_values, target=metric.target_value, unknown=None,
    ))
