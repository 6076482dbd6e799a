"""What both parsers produce: a `Batch` of distinct runs and series and one result per record,
built by a `Normalizer` from each well-formed record's `RecordFields`.

Imports no Django. A run's and a series' identity is the digest of what identifies it,
so a repeat of either (in this upload or a later one) is recognised without a query.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec
import orjson

from benchsite.results.ingest import checks
from benchsite.results.ingest.checks import Problems
from runner.contract.record import (
    INT_RUN_FIELDS,
    MAX_TEXT,
    REQUIRED_RUN_FIELDS,
    RUN_FIELDS,
)
from runner.contract.repos import repo_problem

RUN_FIELD_SET = frozenset(RUN_FIELDS)
# Readings that change between two records of one job: not part of the run's identity.
VOLATILE_RUNNER_KEYS = frozenset({"avail_mem_in_gb", "avail_gpu_mem_in_gb"})


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


class ResultInfo(msgspec.Struct, gc=False):
    """One record's result. A Struct: made in C (a dataclass's `__init__` is Python, and
    an upload makes one a record)."""

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


@dataclass(slots=True)
class RecordFields:
    """A well-formed record's fields, checked and with defaults filled in ("" for missing
    text, {} or [] for missing parts): what `Normalizer.add` turns into a result."""

    meta: dict[str, Any]  # the run fields, from `Normalizer.run_meta` / `meta_for`
    runners: list[dict]
    dependencies: dict
    run_extra: dict  # the optional run fields the record carries
    benchmark: str
    mode: str
    dtype: str
    benchmark_extra: dict
    model: str
    model_type: str
    backend: str
    origins: list[str]
    model_extra: dict
    inputs: dict
    metric: str
    metric_extra: dict  # without the string results
    values: list[float]
    string_values: list[str] | None
    target: float | None
    unknown: dict | None  # fields the contract does not name, by path


class Normalizer:
    """Normalises the records of one upload into `batch`.

    Uploads hold thousands of records that share their run metadata, runner and
    dependencies, so those are checked and hashed once per distinct value (a comparison
    with the previous record's is much cheaper than hashing).
    """

    def __init__(self, request_meta: dict[str, Any]):
        self.request_meta = request_meta
        self.batch = Batch()
        self.meta_cache: dict[tuple, tuple[dict, list]] = {}
        self.last_run: tuple | None = None

    def run_meta(self, record: dict, problems: Problems) -> dict[str, Any]:
        """The run metadata of a record given as a dict."""
        key = () if RUN_FIELD_SET.isdisjoint(record) else tuple(map(record.get, RUN_FIELDS))
        try:
            return self.meta_for(key, record, problems)
        except TypeError:  # unhashable values: a bad record, checked without the cache
            return check_run_meta(record, self.request_meta, problems)

    def meta_for(self, key: tuple, record: dict, problems: Problems) -> dict[str, Any]:
        """The run metadata of `record`, whose run fields' values are `key` (`record` is
        read only when `key` is not in `meta_cache`)."""
        cached = self.meta_cache.get(key)
        if cached is None:
            found = Problems("")
            cached = self.meta_cache[key] = (
                check_run_meta(record, self.request_meta, found), found.pairs)
        for path, message in cached[1]:
            problems.add(path, message)
        return cached[0]

    def run(self, meta: dict, runners: list, dependencies: dict, extra: dict,
            device: str, arch: str) -> str:
        """The identity of a record's run, adding the run to the batch when new."""
        key = (meta, runners, dependencies, extra)
        last = self.last_run
        if last is not None and last[0] is meta and last[1:4] == key[1:]:
            return last[4]
        stable_runners = [{k: v for k, v in runner.items() if k not in VOLATILE_RUNNER_KEYS}
                          for runner in runners]
        identity = digest([*(meta[name] for name in RUN_FIELDS if name != "timestamp"),
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

    def add(self, fields: RecordFields) -> ResultInfo:
        """The result of a well-formed record, adding its run and series to the batch."""
        meta, bench_extra = fields.meta, fields.benchmark_extra
        first_runner = fields.runners[0] if fields.runners else {}
        device = checks.label(first_runner.get("name") or bench_extra.get("device") or "cpu")
        arch = checks.label(first_runner.get("type") or bench_extra.get("arch")
                            or first_runner.get("cpu_info") or "")
        run_identity = self.run(meta, fields.runners, fields.dependencies, fields.run_extra,
                                device, arch)
        identifying = {}
        if bench_extra:
            identifying["benchmark"] = bench_extra
        if fields.model_extra:
            identifying["model"] = fields.model_extra
        if fields.inputs:
            identifying["inputs"] = fields.inputs
        series = SeriesInfo(
            meta["repo"], fields.benchmark, fields.mode, fields.dtype, fields.model,
            fields.model_type, fields.backend, fields.origins, device, arch, fields.metric,
            identifying, checks.label(bench_extra.get("torch_compile_mode")
                                      or bench_extra.get("compile_mode") or ""))
        series_identity = digest(tuple(series))
        self.batch.series.setdefault(series_identity, series)
        return ResultInfo(
            run=run_identity,
            series=series_identity,
            timestamp=meta["timestamp"],
            values=fields.values,
            value=aggregate(fields.values),
            target=fields.target or None,
            string_values=fields.string_values or None,
            extra_info=fields.metric_extra or None,
            unknown=fields.unknown or None,
        )


def aggregate(values: list[float]) -> float | None:
    """The value charts use: the median of the repetitions (NaN ones are missing)."""
    if len(values) == 1 and values[0] == values[0]:  # one value, not NaN
        return values[0]
    present = [value for value in values if not math.isnan(value)]
    if not present:
        return None
    return present[0] if len(present) == 1 else statistics.median(present)


def check_run_meta(record: dict, request_meta: dict, problems: Problems) -> dict[str, Any]:
    """A record's run fields, each from the record or else from the request's metadata."""
    meta: dict[str, Any] = {}
    for key in RUN_FIELDS:
        value = record.get(key)
        where = key
        if value is None or value == "":
            value = request_meta.get(key)
            where = f"{key} (from the request)"
        if key in INT_RUN_FIELDS:
            meta[key] = checks.integer(value, where, problems,
                                       default=1 if key == "run_attempt" else 0)
        elif key == "timestamp":
            meta[key] = checks.timestamp(value, where, problems)
        elif value is None or value == "":
            if key in REQUIRED_RUN_FIELDS:
                problems.add(key, "required: give it in the record, in the envelope's metadata "
                             f"or as the ?{key}= query parameter")
            meta[key] = ""
        elif not isinstance(value, str):
            problems.add(where, f"expected a string, got {checks.type_name(value)}")
        elif len(value) > MAX_TEXT:
            problems.add(where, f"longer than {MAX_TEXT} characters")
        elif reason := checks.text_problem(value):
            problems.add(where, reason)
        else:
            meta[key] = value
    repo = meta.get("repo", "")
    if repo and (problem := repo_problem(repo)):
        where = "repo" if record.get("repo") else "repo (from the request)"
        problems.add(where, problem)
    return meta


def digest(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()
