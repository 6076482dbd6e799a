"""Checking run settings (a job's timing options, a spec's `timing`) against the dataclass
that holds them, so every family validates them the same way and says the same things.

A field's type says what a value must be (bool, int, float or str, a float meaning seconds);
its metadata may set a bound: `field(default=30, metadata=at_least(1))`, name a float that
is not seconds: `above(0, "a fraction")`, or list a str's choices: `one_of(("a", "b"))`.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping
from typing import Any


def at_least(least: float, what: str | None = None) -> dict[str, Any]:
    """`what` names a float that is not seconds ("a fraction")."""
    return {"least": least, "what": what}


def above(bound: float, what: str | None = None) -> dict[str, Any]:
    return {"above": bound, "what": what}


def one_of(choices: tuple[str, ...]) -> dict[str, Any]:
    return {"choices": choices}


def settings_problems(settings: Any, schema: type, path: str = "") -> list[str]:
    """Every way `settings` (overrides of some of `schema`'s fields) are wrong; `path` names
    where they came from in a spec."""
    where = f"{path}: " if path else ""
    if not isinstance(settings, Mapping):
        return [f"{path or 'settings'}: must be a mapping of settings"]
    fields = {field.name: field for field in dataclasses.fields(schema)}
    found = []
    unknown = sorted(str(key) for key in settings if key not in fields)
    if unknown:
        found.append(f"{where}unknown settings {unknown}; known: {list(fields)}")
    types = typing.get_type_hints(schema)
    for key, value in settings.items():
        if key in fields:
            problem = _value_problem(types[key], fields[key].metadata, value)
            if problem:
                found.append(f"{path + '.' if path else ''}{key}: {problem}, not {value!r}")
    return found


def validate(settings: Any, schema: type) -> None:
    """ValueError listing every problem of `settings` (a job's run settings)."""
    found = settings_problems(settings, schema)
    if found:
        raise ValueError("; ".join(found))


def _value_problem(kind: Any, bounds: Mapping[str, Any], value: Any) -> str | None:
    if kind is bool:
        return None if isinstance(value, bool) else "must be true or false"
    if kind is str:
        choices = bounds["choices"]
        return None if value in choices else f"must be one of {', '.join(choices)}"
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        number = number and isinstance(value, int)
        what = "an integer"
    else:
        number = number and math.isfinite(value)
        what = bounds.get("what") or "a number of seconds"
    if "least" in bounds:
        if not number or value < bounds["least"]:
            return f"must be {what} of at least {bounds['least']:g}"
    elif "above" in bounds:
        if not number or value <= bounds["above"]:
            return f"must be {what} above {bounds['above']:g}"
    elif not number:
        return f"must be {what}"
    return None
