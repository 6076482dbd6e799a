"""What tells series apart: the Series fields beside benchmark, model and metric, and each
key of their identifying extra_info (vLLM's `benchmark.args.tensor_parallel_size`, torchao's
`benchmark.model_type`, ...). A page showing several series shows each dimension that
differs between them, so no two of its rows or lines look the same."""

from __future__ import annotations

import json
import re

import orjson
from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet, TextField
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Cast

from benchsite.results.models import Series

# The Series fields that tell a run's series apart, beside benchmark, model and metric (always
# shown): a column each, when it differs between the rows. Each key of the identifying
# extra_info (benchmark.*, model.*, inputs.*) is one more such dimension.
DIMENSIONS = ("backend", "mode", "dtype", "model_type", "suite", "origins", "device", "arch",
              "compile_mode")
JSON_FIELDS = ("origins", "extra_info")  # of the fields read, those stored as JSON


def _flat(info, prefix: str = "") -> dict[str, object]:
    """A nested extra_info as {"benchmark.args.tensor_parallel_size": 2, ...}."""
    if not isinstance(info, dict):
        return {prefix: info}
    flat = {}
    for key, value in info.items():
        flat.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def _text(value) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def _same_split(a: list, b: list) -> bool:
    """Whether two columns tell the same rows apart (each value of one matches one of the
    other's): then the second adds nothing."""
    return len(set(a)) == len(set(b)) == len(set(zip(a, b, strict=True)))


def identity_columns(series_ids) -> tuple[list[str], dict[int, list[str | None]]]:
    """The dimensions that differ between these series, as column titles, and each series'
    values of them: every series the rows show can be told apart (none is the same in all
    but one of them that is hidden)."""
    fields = ("model", *DIMENSIONS, "extra_info")
    # Series that differ only in their metric have the same values here: each distinct set
    # is worked out once (a run's 4,608 series took 0.5 s one by one). Which columns differ
    # depends on the distinct values only, not on how many series share them. The JSON
    # fields come as their text and only the distinct ones are decoded: Django's decoding of
    # every row's two JSON fields took 42 ms of a 170 ms run page at 10M results.
    as_text = {name: Cast(name, TextField()) for name in JSON_FIELDS}
    index_of: dict[int, int] = {}
    distinct: dict[tuple, int] = {}
    for pk, *values in (Series.objects.filter(id__in=series_ids)
                        .annotate(**{f"{name}_text": cast for name, cast in as_text.items()})
                        .values_list("id", *(f"{name}_text" if name in as_text else name
                                             for name in fields))):
        index_of[pk] = distinct.setdefault(tuple(values), len(distinct))
    json_at = [i for i, name in enumerate(fields) if name in as_text]
    found = [[orjson.loads(value) if i in json_at and value is not None else value
              for i, value in enumerate(values)] for values in distinct]
    flat = [_flat(row[-1] or {}) for row in found]
    candidates: dict[str, list] = {name: [_text(row[i]) for row in found]
                                   for i, name in enumerate(fields[:-1])}
    for key in sorted({key for info in flat for key in info}):
        candidates[key] = [_text(info.get(key)) for info in flat]
    shown: dict[str, list] = {}
    for name, values in candidates.items():
        if len(set(values)) < 2:  # the same for every row
            continue
        if any(_same_split(values, other) for other in shown.values()):
            continue  # a column shown already tells these rows apart the same way
        shown[name] = values
    shown.pop("model", None)  # always a column of its own
    columns = list(shown)
    per_row = [[shown[name][i] for name in columns] for i in range(len(found))]
    return columns, {pk: per_row[index] for pk, index in index_of.items()}


EXTRA_KEY = re.compile(r"[A-Za-z0-9_.\-]+")


class ExtraField(forms.CharField):
    """One identifying extra_info value, as `key=value` with a dotted key
    (`benchmark.model_type=linear`, `benchmark.args.tensor_parallel_size=2`)."""

    def clean(self, value):
        value = super().clean(value)
        if value:
            key, sep, _ = value.partition("=")
            if not sep or not EXTRA_KEY.fullmatch(key) or "" in key.split("."):
                raise ValidationError(
                    "write key=value with a dotted extra_info key, e.g. "
                    "benchmark.model_type=linear")
        return value


def with_extra(series: QuerySet, extra: str) -> QuerySet:
    """The series whose identifying extra_info holds `extra` (`key=value`, ExtraField's
    form): the value as JSON where it parses (2, true), else as text."""
    key, _, raw = extra.partition("=")  # (ExtraField checked the form)
    path = KeyTransform(key.split(".")[0], "extra_info")
    for part in key.split(".")[1:]:
        path = KeyTransform(part, path)
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return series.alias(_extra=path).filter(_extra=value)

