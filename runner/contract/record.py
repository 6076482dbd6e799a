"""The v3 record and its run fields, as msgspec Structs.

The Structs are the canonical form: what our writers produce and what the server's fast path
decodes. The server's general parser accepts more (the quirks of real writers: bare numbers,
"inf" strings, misplaced metric names) and keeps fields the Structs do not name as
`unknown`; its known-field sets are these Structs' fields.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any

import msgspec

# Run metadata: the fields a record may carry or the uploader fills in (query parameters of
# the upload API, options of `python -m runner upload`).
RUN_FIELDS = ("repo", "head_branch", "head_sha", "workflow_id", "run_attempt", "job_id",
              "name", "timestamp")
INT_RUN_FIELDS = frozenset({"workflow_id", "run_attempt", "job_id"})
REQUIRED_RUN_FIELDS = ("repo", "head_branch", "head_sha")
# Carried with the run (Run.extra), never part of the series.
OPTIONAL_RUN_FIELDS = ("servicelab_experiment_id", "servicelab_trial_id", "schema_version")
MAX_TEXT = 255  # the longest name, mode, dtype... a series stores (a varchar(255) column)

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TEXT)]
Text = Annotated[str, msgspec.Meta(max_length=MAX_TEXT)] | None
Extra = dict[str, Any] | None
RunField = str | int | float | None  # checked by the server once per distinct value


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
    type: Any = None  # some writers put the metric's name here; kept, not interpreted
    benchmark_values: list[float] | None = None
    target_value: float | None = None
    extra_info: Extra = None  # string results go in extra_info["benchmark_values"]


class Record(_Part):
    benchmark: Benchmark
    model: Model
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
    inputs: Extra = None
    runners: list[dict[str, Any]] | None = None
    dependencies: Extra = None


def fields(struct: type[msgspec.Struct]) -> frozenset[str]:
    return frozenset(struct.__struct_fields__)


KNOWN_TOP = fields(Record)
KNOWN_BENCHMARK = fields(Benchmark)
KNOWN_MODEL = fields(Model)
KNOWN_METRIC = fields(Metric)
assert {*RUN_FIELDS, *OPTIONAL_RUN_FIELDS} <= KNOWN_TOP


def problems(records: Iterable[Any]) -> list[str]:
    """Every way `records` (as a writer produced them, before JSON) depart from the canonical
    form; empty when they conform. For writers' tests: stricter than the upload API."""
    found = []
    for index, record in enumerate(records):
        try:
            decoded = msgspec.convert(record, Record, strict=False)
        except msgspec.ValidationError as error:
            found.append(f"records[{index}]: {error}")
            continue
        metric = decoded.metric
        strings = (metric.extra_info or {}).get("benchmark_values")
        if not metric.benchmark_values and not strings:
            found.append(f"records[{index}].metric: no value (numbers in benchmark_values or "
                         "strings in extra_info.benchmark_values)")
        if strings is not None and not (isinstance(strings, list)
                                        and all(isinstance(s, str) for s in strings)):
            found.append(f"records[{index}].metric.extra_info.benchmark_values: "
                         "expected a list of strings")
    return found
