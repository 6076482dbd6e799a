"""The fast path for well-formed records: each canonical v3 record decoded and type-checked
in C by msgspec with the contract's Structs instead of building dicts and checking them in
Python. Imports no Django.

It accepts only what `parse` accepts unchanged: no unknown fields, numbers as JSON numbers,
text within its limits, nothing that no column can hold (`checks.storable`: an integer
beyond 64 bits or nesting orjson cannot write; the caller keeps records with an escaped NUL
away, and msgspec refuses lone surrogates itself). Anything else (writers' quirks, errors)
returns None, and `ingest.mixed` hands that record to `parse`, which accepts the quirks and
explains every problem. Both end in `Normalizer.add`, so both store the same thing
(tests/results/test_ingest_fast.py checks this on every sample).
"""

from __future__ import annotations

import operator
from typing import Any

import msgspec
import orjson

from benchsite.caching import MISSING, ProcessCache
from benchsite.results.ingest import checks
from benchsite.results.ingest.checks import Problems
from benchsite.results.ingest.normalize import (
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
    Metric,
    Model,
    Record,
)

NULL = msgspec.Raw(b"null")
_SEPARATOR = b"\0"


# The parts that identify a series or run stay raw JSON text: a series seen before is
# recognised by its bytes, and only new ones are decoded with the contract's Structs.
RAW_PARTS = ("benchmark", "model", "inputs", "runners", "dependencies")


def _raw_field(field: msgspec.structs.FieldInfo, raw: tuple[str, ...],
               types: dict[str, type] | None = None) -> tuple:
    kind = msgspec.Raw if field.name in raw else (types or {}).get(field.name, field.type)
    if field.required:
        return (field.name, kind)
    return (field.name, kind, NULL if field.name in raw else field.default)


# The metric's extra_info stays raw too: most records repeat one of a few texts
# (`{"unit":"ms"}`), decoded and checked once a process (`METRIC_EXTRAS`), one dict shared by
# their results, whose COPY text is then written once an upload (`store.CopyWriter`).
RawMetric = msgspec.defstruct(
    "RawMetric", [_raw_field(f, ("extra_info",)) for f in msgspec.structs.fields(Metric)],
    forbid_unknown_fields=True, gc=False)
# The contract's `Record`, field for field, with RAW_PARTS left undecoded.
RawRecord = msgspec.defstruct(
    "RawRecord",
    [_raw_field(f, RAW_PARTS, {"metric": RawMetric}) for f in msgspec.structs.fields(Record)],
    forbid_unknown_fields=True, gc=False)


_RECORD = msgspec.json.Decoder(RawRecord)
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
# A metric's extra_info (None for none or empty) by its raw text, when it holds no string
# results (`benchmark_values`, which differ record by record). One dict is shared by many
# results and uploads: nothing may change it.
METRIC_EXTRAS = ProcessCache(maxsize=10_000)


class FastPath:
    """The fast path for the records of one upload, adding their runs and series to
    `normalizer`'s batch."""

    def __init__(self, normalizer: Normalizer):
        self.normalizer = normalizer
        self.batch = normalizer.batch
        self.runs: dict[tuple, str] = {}
        self.last_run: tuple = ((), "")  # the previous record's run: its parts and identity
        self.key: tuple | None = None
        self.meta: dict = {}
        self.problems = Problems("")

    def decode(self, raw: bytes | msgspec.Raw) -> ResultInfo | None:
        """The result of one record's JSON text (its run and series added to the batch);
        None when the general path must decide (orjson refuses what no digest or JSON column
        can hold)."""
        try:
            return self._result(_RECORD.decode(raw))
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError,
                orjson.JSONEncodeError):
            return None

    def _result(self, record: RawRecord) -> ResultInfo | None:
        given = _run_fields(record)
        if given != self.key:  # most records share their run fields with the previous one
            self.key = given
            self.meta = self.normalizer.meta_for(
                () if given == _NO_RUN_FIELDS else given,
                dict(zip(RUN_FIELDS, given, strict=True)), self.problems)
        meta = self.meta
        metric = record.metric
        raw_extra = bytes(metric.extra_info)
        metric_extra = METRIC_EXTRAS.lookup(raw_extra)
        string_values = None
        if metric_extra is MISSING:
            metric_extra = _EXTRA.decode(raw_extra) or {}
            if "benchmark_values" in metric_extra:
                string_values = checks.strings(metric_extra["benchmark_values"], self.problems)
                metric_extra = {k: v for k, v in metric_extra.items() if k != "benchmark_values"}
            if metric_extra:
                orjson.dumps(metric_extra)
            metric_extra = metric_extra or None
            if string_values is None:
                METRIC_EXTRAS.put(raw_extra, metric_extra)
        values = metric.benchmark_values or []
        if self.problems.items or (not values and not string_values):
            self.problems.items.clear()
            self.key = None  # the next record's run fields are checked again
            return None
        optional = _optional_fields(record)
        parts = (given, record.runners, record.dependencies, optional)
        if parts == self.last_run[0]:  # most records share their run with the previous one
            run_key, run = None, self.last_run[1]
        else:
            # Raw JSON text never holds a NUL byte: joined with one, the parts stay apart
            # (and one bytes object hashes once, however often the caches look it up).
            run_key = (given, _SEPARATOR.join((record.runners, record.dependencies)),
                       *_run_extra(optional).items())
            run = self.runs.get(run_key)
            if run is not None:
                self.last_run = (parts, run)
        series_key = (meta["repo"], metric.name, _SEPARATOR.join((
            record.benchmark, record.model, record.inputs, record.runners)))
        series = SERIES_CACHE.lookup(series_key)
        if run is None or series is MISSING:
            result = _decoded(record, self.normalizer, meta, _run_extra(optional), metric_extra,
                              values, string_values)
            if result is None:
                return None
            orjson.dumps(self.batch.runs[result.run].runners)
            if run_key is not None:
                self.runs[run_key] = result.run
            self.last_run = (parts, result.run)
            SERIES_CACHE.put(series_key, (result.series, self.batch.series[result.series]))
            return result
        self.batch.series.setdefault(series[0], series[1])
        # positionally (run, series, timestamp, values, value, target, string_values,
        # extra_info, unknown): a record's keywords cost more than the rest of this line; one
        # value not NaN is its own aggregate
        return ResultInfo(run, series[0], meta["timestamp"], values,
                          values[0] if len(values) == 1 and values[0] == values[0]
                          else aggregate(values),
                          metric.target_value or None, string_values or None, metric_extra,
                          None)


def _run_extra(optional: tuple) -> dict:
    """The optional run fields a record gives, by name."""
    if optional == _NO_OPTIONAL_FIELDS:
        return {}
    return {name: value for name, value in zip(OPTIONAL_RUN_FIELDS, optional, strict=True)
            if value is not msgspec.UNSET}


def _decoded(record: RawRecord, normalizer: Normalizer, meta: dict, run_extra: dict,
             metric_extra: dict | None, values: list[float],
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
        metric=metric.name, metric_extra=metric_extra or {}, values=values,
        string_values=string_values, target=metric.target_value, unknown=None,
    ))
