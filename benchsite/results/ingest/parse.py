"""The general path: any body shape real writers send, every quirk accepted, every problem
listed (with the record's index and the field's path). Imports no Django.

Bodies: a JSON list, one object, JSON Lines or an envelope `{"metadata": {...}, "records":
[...]}`; bare `NaN`/`Infinity` tokens. Values: a bare number or "inf"/"nan" strings; string
results (accuracy "pass") in `metric.extra_info.benchmark_values`; any JSON in `extra_info`.
Nothing is dropped: fields the contract does not name are kept in `unknown`.
"""

from __future__ import annotations

import io
import itertools
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec
import orjson

from benchsite.results.ingest import checks
from benchsite.results.ingest.checks import Problems
from benchsite.results.ingest.normalize import (
    Batch,
    Normalizer,
    RecordFields,
    ResultInfo,
)
from runner.contract.record import (
    KNOWN_BENCHMARK,
    KNOWN_METRIC,
    KNOWN_MODEL,
    KNOWN_TOP,
    OPTIONAL_RUN_FIELDS,
)


class BodyError(ValueError):
    """The request body is not JSON, JSON Lines or a known envelope."""


# A body split into its records without decoding them: each stays JSON text (a view of the
# body, no copy) until the fast path or `decode_record` reads it.
_TOP = msgspec.json.Decoder(list[msgspec.Raw] | dict[str, msgspec.Raw])
_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])
_RAW = msgspec.json.Decoder(msgspec.Raw)
Text = bytes | msgspec.Raw  # a record still as JSON text


def split_body(body: bytes) -> tuple[Iterable[Text | Any], dict[str, Any]]:
    """Split a body into its records and the envelope's metadata (empty when none). Records
    come as JSON text (`Text`) where the body allows, else decoded (bare NaN tokens); JSON
    Lines are read one line at a time, so the body is never held twice."""
    if not body.strip():
        raise BodyError("body: empty; expected a JSON list, a JSON object or JSON Lines")
    try:
        document, text = _TOP.decode(body), True
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as error:
        try:  # another JSON value, bare NaN tokens, JSON Lines or not JSON
            if type(error) is msgspec.DecodeError and not _PYTHON_ONLY.search(body):
                raise ValueError(str(error)) from None  # not decoded again, as a whole
            document, text = _loads(body), False
        except ValueError as whole_error:
            lines = _lines(body)
            first = list(itertools.islice(lines, 2))
            if len(first) < 2:
                raise BodyError(f"body: invalid JSON: {whole_error}") from None
            return _json_lines(itertools.chain(first, lines)), {}
    if isinstance(document, list):
        return document, {}
    if isinstance(document, dict):
        if "records" in document and "benchmark" not in document:
            metadata = _decoded(document.get("metadata")) or {}
            if not isinstance(metadata, dict):
                raise BodyError("metadata: expected an object")
            records = document["records"]
            if isinstance(records, msgspec.Raw):
                try:
                    records = _RAW_LIST.decode(records)
                except msgspec.ValidationError:
                    records = None
            if not isinstance(records, list):
                raise BodyError("records: expected a list of records")
            return records, metadata
        return [body if text else document], {}
    raise BodyError(f"body: expected a JSON list or object, got {checks.type_name(document)}")


def decode_record(record: Text | Any) -> Any:
    """A record of `split_body` decoded (as it is when it is not text)."""
    if not isinstance(record, Text):
        return record
    try:
        return _loads(record)
    except ValueError as error:
        raise BodyError(f"body: invalid JSON: {error}") from None


def _decoded(value: Any) -> Any:
    return msgspec.json.decode(value) if isinstance(value, msgspec.Raw) else value


def _lines(body: bytes) -> Iterator[tuple[int, bytes]]:
    """The numbered non-blank lines of `body`, one at a time."""
    for number, line in enumerate(io.BytesIO(body), start=1):
        if line.strip():
            yield number, line


def _json_lines(lines: Iterable[tuple[int, bytes]]) -> Iterator[Text | Any]:
    """Each line's record: its text once checked to be JSON, else decoded (NaN tokens)."""
    for number, line in lines:
        try:
            yield _RAW.decode(line)
        except (msgspec.DecodeError, RecursionError):
            try:
                yield _loads(line)
            except ValueError as error:
                raise BodyError(f"body: line {number}: invalid JSON: {error}") from None


CONSTANTS = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}
# What only Python's json reads: bare NaN/Infinity, and a surrogate's escape (a lone one is
# refused by msgspec; Python's json reads it, and `checks.storable` says where it is).
_PYTHON_ONLY = re.compile(rb"NaN|Infinity|\\u[dD][89a-fA-F]")


def _loads(text: bytes) -> Any:
    """The JSON value of `text`. msgspec, like the fast path, keeps an integer beyond 64 bits
    an integer (orjson would make it a float), so that both paths refuse it."""
    try:
        return msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError) as error:
        if type(error) is msgspec.DecodeError and not _PYTHON_ONLY.search(text):
            raise ValueError(str(error)) from None
        # Python's json writes bare NaN/Infinity by default, and so do some real writers.
        # They become the strings "nan"/"inf", which values accept and JSON columns can hold.
        try:
            return json.loads(bytes(text), parse_constant=CONSTANTS.__getitem__)
        except RecursionError:
            raise ValueError(f"nested deeper than {checks.MAX_DEPTH} levels") from None


def normalize(
    records: list[Any], metadata: dict[str, Any] | None = None
) -> tuple[Batch, list[str]]:
    """Normalise records, filling run metadata they lack from `metadata`.

    Returns the batch and every problem found; a batch with problems must not be stored.
    """
    normalizer = Normalizer(metadata or {})
    errors: list[str] = []
    if not records:
        errors.append("records: no records in the upload")
    for index, record in enumerate(records):
        problems = Problems(f"records[{index}]")
        result = record_result(record, normalizer, problems)
        errors.extend(problems.items)
        if result is not None:
            normalizer.batch.results.append(result)
    return normalizer.batch, errors


def record_result(record: Any, normalizer: Normalizer, problems: Problems) -> ResultInfo | None:
    """The result of one decoded record, or None with its problems in `problems`."""
    if _may_hold_unstorable(record):
        checks.storable(record, "", problems)
        if problems.items:
            return None
    if type(record) is not dict:
        problems.add_whole(f"expected an object, got {checks.type_name(record)}")
        return None
    fields = _fields(record, normalizer, problems)
    if problems.items:
        return None
    return normalizer.add(fields)


def _may_hold_unstorable(record: Any) -> bool:
    """False when nothing in `record` needs `checks.storable` (which walks every value to
    say where), by two checks at C speed: orjson writes everything the store can, and
    writes a NUL character as the escape \\u0000."""
    try:
        return b"\\u0000" in orjson.dumps(record)
    except orjson.JSONEncodeError:
        return True


def validate_records(records: list[Any], metadata: dict[str, Any] | None = None) -> list[str]:
    """The problems the upload API would report for these records (empty when valid)."""
    return normalize(records, metadata)[1]


def _fields(record: dict, normalizer: Normalizer, problems: Problems) -> RecordFields:
    """The record's fields as `Normalizer.add` takes them; problems go to `problems` (in
    the order of the record's parts)."""
    benchmark = checks.part(record, "benchmark", problems)
    model = checks.part(record, "model", problems)
    metric = checks.part(record, "metric", problems)
    unknown = unknown_fields(record, benchmark, model, metric)
    bench_name = checks.text(benchmark, "name", "benchmark.name", problems, required=True)
    model_name = checks.text(model, "name", "model.name", problems, required=True)
    # Some writers put the metric's name under `type`.
    misplaced = "name" not in metric and "type" in metric
    metric_name = checks.text(metric, "type" if misplaced else "name",
                              "metric.type" if misplaced else "metric.name", problems,
                              required=True)
    mode = checks.text(benchmark, "mode", "benchmark.mode", problems) or ""
    dtype = checks.text(benchmark, "dtype", "benchmark.dtype", problems) or ""
    model_type = checks.text(model, "type", "model.type", problems) or ""
    backend = checks.text(model, "backend", "model.backend", problems) or ""
    bench_extra = checks.extra(benchmark.get("extra_info"), "benchmark.extra_info", problems)
    model_extra = checks.extra(model.get("extra_info"), "model.extra_info", problems)
    metric_extra = checks.extra(metric.get("extra_info"), "metric.extra_info", problems)
    inputs = checks.extra(record.get("inputs"), "inputs", problems)
    origins = checks.origins(model.get("origins"), problems)
    runners = checks.runners(record.get("runners"), problems)
    dependencies = checks.extra(record.get("dependencies"), "dependencies", problems)

    values = checks.numbers(metric.get("benchmark_values"), problems)
    string_values = None
    if "benchmark_values" in metric_extra:
        string_values = checks.strings(metric_extra["benchmark_values"], problems)
        metric_extra = {k: v for k, v in metric_extra.items() if k != "benchmark_values"}
    if not values and not string_values:
        problems.add(
            "metric.benchmark_values",
            "at least one value is required (numbers in metric.benchmark_values or strings "
            "in metric.extra_info.benchmark_values)",
        )
    target = metric.get("target_value")
    if target is not None and type(target) is not float:
        target = checks.number(target, "metric.target_value", problems)
    return RecordFields(
        meta=normalizer.run_meta(record, problems), runners=runners,
        dependencies=dependencies,
        run_extra={key: record[key] for key in OPTIONAL_RUN_FIELDS if key in record},
        benchmark=bench_name, mode=mode, dtype=dtype, benchmark_extra=bench_extra,
        model=model_name, model_type=model_type, backend=backend, origins=origins,
        model_extra=model_extra, inputs=inputs, metric=metric_name, metric_extra=metric_extra,
        values=values, string_values=string_values, target=target, unknown=unknown,
    )


def unknown_fields(record: dict, benchmark: dict, model: dict, metric: dict) -> dict | None:
    """The fields the contract's Structs do not name, by path ("notes", "model.notes")."""
    if (KNOWN_TOP.issuperset(record) and KNOWN_BENCHMARK.issuperset(benchmark)
            and KNOWN_MODEL.issuperset(model) and KNOWN_METRIC.issuperset(metric)):
        return None
    unknown = {key: value for key, value in record.items() if key not in KNOWN_TOP}
    for part, known, name in ((benchmark, KNOWN_BENCHMARK, "benchmark"),
                              (model, KNOWN_MODEL, "model"),
                              (metric, KNOWN_METRIC, "metric")):
        unknown.update((f"{name}.{key}", value) for key, value in part.items()
                       if key not in known)
    return unknown
