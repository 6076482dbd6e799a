"""Parsing and normalisation of PyTorch OSS benchmark ("v3") records.

Pure Python (no Django import): the upload API, the demo loader and the workers all go
through `normalize`, and the runner's tests validate its output with `validate_records`.

Real writers are accepted as they are: a JSON list, one object, JSON Lines or an envelope
`{"metadata": {...}, "records": [...]}`; bare `NaN`/`Infinity` tokens; values as a bare
number or as "inf"/"nan" strings; string results (accuracy "pass") in
`metric.extra_info.benchmark_values`; any JSON in `extra_info`. Every problem is reported
with the record index and field path, and nothing is dropped: fields we do not model are
kept in `unknown`.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

import orjson

from runner.upload import METADATA_FIELDS as RUN_FIELDS

RUN_FIELD_SET = frozenset(RUN_FIELDS)
INT_RUN_FIELDS = {"workflow_id", "run_attempt", "job_id"}
REQUIRED_RUN_FIELDS = ("repo", "head_branch", "head_sha")
OPTIONAL_RUN_FIELDS = ("servicelab_experiment_id", "servicelab_trial_id", "schema_version")
KNOWN_TOP = {
    *RUN_FIELDS,
    *OPTIONAL_RUN_FIELDS,
    "benchmark",
    "model",
    "inputs",
    "metric",
    "runners",
    "dependencies",
}
KNOWN_BENCHMARK = {"name", "mode", "dtype", "extra_info"}
KNOWN_MODEL = {"name", "type", "backend", "origins", "extra_info"}
KNOWN_METRIC = {"name", "type", "benchmark_values", "target_value", "extra_info"}
MAX_TEXT = 255
# Readings that change between two records of one job: not part of the run's identity.
VOLATILE_RUNNER_KEYS = frozenset({"avail_mem_in_gb", "avail_gpu_mem_in_gb"})


class BodyError(ValueError):
    """The request body is not JSON, JSON Lines or a known envelope."""


@dataclass(slots=True)
class RunInfo:
    identity: str
    repo: str
    head_branch: str
    head_sha: str
    workflow_id: int
    run_attempt: int
    job_id: int
    name: str
    timestamp: int
    runners: list
    dependencies: dict
    extra: dict
    device: str
    arch: str


class SeriesInfo(NamedTuple):
    """What identifies a series; its identity is the digest of these fields, in order."""

    repo: str
    benchmark: str
    mode: str
    dtype: str
    model: str
    model_type: str
    backend: str
    origins: list
    device: str
    arch: str
    metric: str
    extra_info: dict
    compile_mode: str  # benchmark.extra_info's torch_compile_mode, a dashboard dimension

    @property
    def suite(self) -> str:
        return self.origins[0] if self.origins else ""


@dataclass(slots=True)
class ResultInfo:
    run: str  # RunInfo.identity
    series: str  # SeriesInfo.identity
    timestamp: int
    values: list[float]
    value: float | None
    target: float | None
    string_values: list[str] | None
    extra_info: dict | None
    unknown: dict | None


@dataclass
class Batch:
    """A normalised upload: distinct runs and series, and one result per record."""

    runs: dict[str, RunInfo] = field(default_factory=dict)
    series: dict[str, SeriesInfo] = field(default_factory=dict)
    results: list[ResultInfo] = field(default_factory=list)

    @property
    def repos(self) -> set[str]:
        return {run.repo for run in self.runs.values()}


def parse_body(body: bytes) -> tuple[list[Any], dict[str, Any]]:
    """Split a body into its records and the envelope's metadata (empty when none)."""
    if not body.strip():
        raise BodyError("body: empty; expected a JSON list, a JSON object or JSON Lines")
    try:
        document = _loads(body)
    except ValueError as whole_error:
        lines = [line for line in body.splitlines() if line.strip()]
        if len(lines) < 2:
            raise BodyError(f"body: invalid JSON: {whole_error}") from None
        records = []
        for number, line in enumerate(body.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(_loads(line))
            except ValueError as error:
                raise BodyError(f"body: line {number}: invalid JSON: {error}") from None
        return records, {}
    if isinstance(document, list):
        return document, {}
    if isinstance(document, dict):
        if "records" in document and "benchmark" not in document:
            metadata = document.get("metadata") or {}
            if not isinstance(metadata, dict):
                raise BodyError("metadata: expected an object")
            records = document["records"]
            if not isinstance(records, list):
                raise BodyError("records: expected a list of records")
            return records, metadata
        return [document], {}
    raise BodyError(f"body: expected a JSON list or object, got {_type(document)}")


CONSTANTS = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}


def _loads(text: bytes) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        # Python's json writes bare NaN/Infinity by default, and so do some real writers.
        # They become the strings "nan"/"inf", which values accept and JSON columns can hold.
        return json.loads(text, parse_constant=CONSTANTS.__getitem__)


def normalize(
    records: list[Any], metadata: dict[str, Any] | None = None
) -> tuple[Batch, list[str]]:
    """Normalise records, filling run metadata they lack from `metadata`.

    Returns the batch and every problem found; a batch with problems must not be stored.
    """
    normalizer = _Normalizer(metadata or {})
    errors: list[str] = []
    if not records:
        errors.append("records: no records in the upload")
    for index, record in enumerate(records):
        problems = _Problems(f"records[{index}]")
        result = normalizer.record(record, problems)
        if problems.items:
            errors.extend(problems.items)
        elif result is not None:
            normalizer.batch.results.append(result)
    return normalizer.batch, errors


def validate_records(records: list[Any], metadata: dict[str, Any] | None = None) -> list[str]:
    """The problems the upload API would report for these records (empty when valid)."""
    return normalize(records, metadata)[1]


class _Problems:
    def __init__(self, prefix: str):
        self.prefix = prefix
        self.items: list[str] = []
        self.pairs: list[tuple[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(f"{self.prefix}.{path}: {message}")
        self.pairs.append((path, message))


class _Normalizer:
    """Normalises the records of one upload.

    Uploads hold thousands of records that share their run metadata, runner and
    dependencies, so those are checked and hashed once per distinct value (a comparison
    with the previous record's is much cheaper than hashing), and well-formed fields take a
    fast path; the detailed checks run only to describe a problem.
    """

    def __init__(self, request_meta: dict[str, Any]):
        self.request_meta = request_meta
        self.batch = Batch()
        self.meta_cache: dict[tuple, tuple[dict, list]] = {}
        self.last_run: tuple | None = None

    def record(self, record: Any, problems: _Problems) -> ResultInfo | None:
        return _normalize_record(record, self, problems)

    def run_meta(self, record: dict, problems: _Problems) -> dict[str, Any]:
        key = () if RUN_FIELD_SET.isdisjoint(record) else tuple(map(record.get, RUN_FIELDS))
        try:
            return self.meta_for(key, record, problems)
        except TypeError:  # unhashable values: a bad record, checked without the cache
            return _run_meta(record, self.request_meta, problems)

    def meta_for(self, key: tuple, record: dict, problems: _Problems) -> dict[str, Any]:
        """The run metadata of `record`, whose run fields' values are `key`."""
        cached = self.meta_cache.get(key)
        if cached is None:
            found = _Problems("")
            cached = self.meta_cache[key] = (_run_meta(record, self.request_meta, found),
                                             found.pairs)
        for path, message in cached[1]:
            problems.add(path, message)
        return cached[0]

    def run(self, meta: dict, runners: list, dependencies: dict, extra: dict,
            device: str, arch: str) -> str:
        """The identity of the record's run, adding the run to the batch when new."""
        key = (meta, runners, dependencies, extra)
        last = self.last_run
        if last is not None and last[0] is meta and last[1:4] == key[1:]:
            return last[4]
        stable_runners = [{k: v for k, v in runner.items() if k not in VOLATILE_RUNNER_KEYS}
                          for runner in runners]
        identity = _digest([*(meta[field] for field in RUN_FIELDS if field != "timestamp"),
                            stable_runners, dependencies, extra])
        self.last_run = (*key, identity)
        run = self.batch.runs.get(identity)
        if run is None:
            self.batch.runs[identity] = RunInfo(
                identity=identity, **meta, runners=runners, dependencies=dependencies,
                extra=extra, device=device, arch=arch,
            )
        elif meta["timestamp"] < run.timestamp:
            run.timestamp = meta["timestamp"]
        return identity

    def add(self, meta: dict, runners: list, dependencies: dict, run_extra: dict,
            bench_name: str, mode: str, dtype: str, bench_extra: dict, model_name: str,
            model_type: str, backend: str, origins: list, model_extra: dict, inputs: dict,
            metric_name: str, metric_extra: dict, values: list[float],
            string_values: list[str] | None, target: float | None,
            unknown: dict | None) -> ResultInfo:
        """The result of a record whose fields are valid, adding its run and series."""
        first_runner = runners[0] if runners else {}
        device = _label(first_runner.get("name") or bench_extra.get("device") or "cpu")
        arch = _label(first_runner.get("type") or bench_extra.get("arch")
                      or first_runner.get("cpu_info") or "")
        run_identity = self.run(meta, runners, dependencies, run_extra, device, arch)
        identifying = {}
        if bench_extra:
            identifying["benchmark"] = bench_extra
        if model_extra:
            identifying["model"] = model_extra
        if inputs:
            identifying["inputs"] = inputs
        series = SeriesInfo(meta["repo"], bench_name, mode, dtype, model_name, model_type,
                            backend, origins, device, arch, metric_name, identifying,
                            _label(bench_extra.get("torch_compile_mode")
                                   or bench_extra.get("compile_mode") or ""))
        series_identity = _digest(tuple(series))
        self.batch.series.setdefault(series_identity, series)
        return ResultInfo(
            run=run_identity,
            series=series_identity,
            timestamp=meta["timestamp"],
            values=values,
            value=aggregate(values),
            target=target or None,
            string_values=string_values or None,
            extra_info=metric_extra or None,
            unknown=unknown or None,
        )


def _normalize_record(
    record: Any, normalizer: _Normalizer, problems: _Problems
) -> ResultInfo | None:
    if type(record) is not dict:
        problems.items.append(f"{problems.prefix}: expected an object, got {_type(record)}")
        return None
    benchmark = _object(record, "benchmark", problems)
    model = _object(record, "model", problems)
    metric = _object(record, "metric", problems)
    unknown = None
    if not (KNOWN_TOP.issuperset(record) and KNOWN_BENCHMARK.issuperset(benchmark)
            and KNOWN_MODEL.issuperset(model) and KNOWN_METRIC.issuperset(metric)):
        unknown = {key: value for key, value in record.items() if key not in KNOWN_TOP}
        for part, known, name in ((benchmark, KNOWN_BENCHMARK, "benchmark"),
                                  (model, KNOWN_MODEL, "model"),
                                  (metric, KNOWN_METRIC, "metric")):
            unknown.update((f"{name}.{key}", value) for key, value in part.items()
                           if key not in known)

    bench_name = _text(benchmark, "name", "benchmark.name", problems, required=True)
    model_name = _text(model, "name", "model.name", problems, required=True)
    # Some writers put the metric's name under `type`.
    misplaced = "name" not in metric and "type" in metric
    metric_name = _text(metric, "type" if misplaced else "name",
                        "metric.type" if misplaced else "metric.name", problems, required=True)
    mode = _text(benchmark, "mode", "benchmark.mode", problems) or ""
    dtype = _text(benchmark, "dtype", "benchmark.dtype", problems) or ""
    model_type = _text(model, "type", "model.type", problems) or ""
    backend = _text(model, "backend", "model.backend", problems) or ""

    bench_extra = _extra(benchmark.get("extra_info"), "benchmark.extra_info", problems)
    model_extra = _extra(model.get("extra_info"), "model.extra_info", problems)
    metric_extra = _extra(metric.get("extra_info"), "metric.extra_info", problems)
    inputs = _extra(record.get("inputs"), "inputs", problems)
    origins = _origins(model.get("origins"), problems)
    runners = _runners(record.get("runners"), problems)
    dependencies = _extra(record.get("dependencies"), "dependencies", problems)

    values = _numbers(metric.get("benchmark_values"), problems)
    string_values = None
    if "benchmark_values" in metric_extra:
        string_values = _strings(metric_extra["benchmark_values"], problems)
        metric_extra = {k: v for k, v in metric_extra.items() if k != "benchmark_values"}
    if not values and not string_values:
        problems.add(
            "metric.benchmark_values",
            "at least one value is required (numbers in metric.benchmark_values or strings "
            "in metric.extra_info.benchmark_values)",
        )
    target = metric.get("target_value")
    if target is not None and type(target) is not float:
        target = _number(target, "metric.target_value", problems)

    meta = normalizer.run_meta(record, problems)
    if problems.items:
        return None
    run_extra = {key: record[key] for key in OPTIONAL_RUN_FIELDS if key in record}
    return normalizer.add(meta, runners, dependencies, run_extra, bench_name, mode, dtype,
                          bench_extra, model_name, model_type, backend, origins, model_extra,
                          inputs, metric_name, metric_extra, values, string_values, target,
                          unknown)


def aggregate(values: list[float]) -> float | None:
    """The value charts use: the median of the repetitions (NaN ones are missing)."""
    if len(values) == 1 and values[0] == values[0]:  # one value, not NaN
        return values[0]
    present = [value for value in values if not math.isnan(value)]
    if not present:
        return None
    return present[0] if len(present) == 1 else statistics.median(present)


def _run_meta(record: dict, request_meta: dict, problems: _Problems) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for key in RUN_FIELDS:
        value = record.get(key)
        where = key
        if value is None or value == "":
            value = request_meta.get(key)
            where = f"{key} (from the request)"
        if key in INT_RUN_FIELDS:
            meta[key] = _integer(value, where, problems, default=1 if key == "run_attempt" else 0)
        elif key == "timestamp":
            meta[key] = _timestamp(value, where, problems)
        elif value is None or value == "":
            if key in REQUIRED_RUN_FIELDS:
                problems.add(key, "required: give it in the record, in the envelope's metadata "
                             f"or as the ?{key}= query parameter")
            meta[key] = ""
        elif not isinstance(value, str):
            problems.add(where, f"expected a string, got {_type(value)}")
        elif len(value) > MAX_TEXT:
            problems.add(where, f"longer than {MAX_TEXT} characters")
        else:
            meta[key] = value
    repo = meta.get("repo", "")
    if repo and (repo.count("/") != 1 or repo.startswith("/") or repo.endswith("/")):
        problems.add("repo", f"expected 'owner/name', got {repo!r}")
    return meta


def _object(parent: dict, key: str, problems: _Problems) -> dict:
    value = parent.get(key)
    if type(value) is dict:
        return value
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.add(key, f"expected an object, got {_type(value)}")
        return {}
    return value


def _text(parent: dict, key: str, path: str, problems: _Problems, required: bool = False):
    value = parent.get(key)
    if type(value) is str and 0 < len(value) <= MAX_TEXT:
        return value
    if value is None or value == "":
        if required:
            problems.add(path, "required")
        return None
    if not isinstance(value, str):
        problems.add(path, f"expected a string, got {_type(value)}")
        return None
    if len(value) > MAX_TEXT:
        problems.add(path, f"longer than {MAX_TEXT} characters")
        return None
    return value


def _extra(value: Any, path: str, problems: _Problems) -> dict:
    if type(value) is dict:
        return value
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.add(path, f"expected an object, got {_type(value)}")
        return {}
    return value


def _origins(value: Any, problems: _Problems) -> list[str]:
    if type(value) is list and all(type(item) is str for item in value):
        return value
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        problems.add("model.origins", "expected a list of strings")
        return []
    return value


def _runners(value: Any, problems: _Problems) -> list[dict]:
    if type(value) is list and all(type(item) is dict for item in value):
        return value
    if value is None:
        return []
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        problems.add("runners", "expected a list of objects")
        return []
    return value


def _numbers(value: Any, problems: _Problems) -> list[float]:
    if type(value) is list and all(type(item) is float for item in value):
        return value
    if value is None:
        return []
    if not isinstance(value, list):
        value = [value]  # a bare number
    numbers = []
    for position, item in enumerate(value):
        number = _number(item, f"metric.benchmark_values[{position}]", problems, missing=math.nan)
        if number is not None:
            numbers.append(number)
    return numbers


def _number(value: Any, path: str, problems: _Problems, missing: float | None = None):
    if value is None:
        return missing
    if isinstance(value, bool):
        problems.add(path, "expected a number, got a boolean")
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)  # "inf", "-inf", "nan", "1.5"
        except ValueError:
            pass
    problems.add(path, f"expected a number, got {_type(value)} {value!r:.40}")
    return None


def _strings(value: Any, problems: _Problems) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        value = [value]
    if not all(isinstance(item, str | int | float) and not isinstance(item, bool)
               for item in value):
        problems.add("metric.extra_info.benchmark_values", "expected a list of strings")
        return []
    return [str(item) for item in value]


def _integer(value: Any, path: str, problems: _Problems, default: int) -> int:
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        problems.add(path, "expected an integer, got a boolean")
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    problems.add(path, f"expected an integer, got {_type(value)} {value!r:.40}")
    return default


def _timestamp(value: Any, path: str, problems: _Problems) -> int:
    """Unix seconds; also accepts numeric strings and ISO 8601. Missing means now."""
    if value is None or value == "":
        return int(datetime.now(UTC).timestamp())
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return int(value)
    if isinstance(value, str):
        try:
            return int(float(value))
        except ValueError:
            pass
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            return int(parsed.timestamp())
    problems.add(path, f"expected Unix seconds or an ISO 8601 time, got {value!r:.40}")
    return 0


def _label(value: Any) -> str:
    """A device or arch name as stored: text of at most MAX_TEXT characters."""
    if type(value) is str and len(value) <= MAX_TEXT:
        return value
    return str(value)[:MAX_TEXT]


def _digest(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _type(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), type(value).__name__)
