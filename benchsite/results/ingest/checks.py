"""Checks of a record's values: each returns the value as stored, or reports the problem to
a `Problems` (with the field's path) and returns a harmless default.

The common, well-formed case is tested first with exact type checks; the detailed checks run
only to describe a problem or to accept a writer's quirk (a bare number, "inf" as a string,
origins as one string...).
"""

from __future__ import annotations

import contextlib
import math
from datetime import UTC, datetime
from typing import Any

from benchsite import dates
from runner.contract.record import MAX_TEXT

BIGINT = (-2**63, 2**63 - 1)  # an integer column
JSON_INT = (-2**63, 2**64 - 1)  # what the stored JSON's writer (orjson) holds
# orjson writes at most 255 levels of nesting; a record is the second level of its list.
MAX_DEPTH = 254
# Where integers are stored as floats (`number`), as the fast path's decoder reads them.
FLOAT_PATHS = ("metric.benchmark_values", "metric.target_value")


class Problems:
    """The problems found in one record, each as "<prefix>.<path>: <message>"."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.items: list[str] = []
        self.pairs: list[tuple[str, str]] = []  # (path, message), to report them again

    def add(self, path: str, message: str) -> None:
        self.items.append(f"{self.prefix}.{path}: {message}" if path
                          else f"{self.prefix}: {message}")
        self.pairs.append((path, message))

    def add_whole(self, message: str) -> None:
        """A problem with the record as a whole (not an object, ...)."""
        self.items.append(f"{self.prefix}: {message}")


def part(parent: dict, key: str, problems: Problems) -> dict:
    """An object-valued field (benchmark, model, metric, extra_info...); {} when absent."""
    value = parent.get(key)
    if type(value) is dict:
        return value
    return extra(value, key, problems)


def extra(value: Any, path: str, problems: Problems) -> dict:
    if type(value) is dict:
        return value
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.add(path, f"expected an object, got {type_name(value)}")
        return {}
    return value


def text(parent: dict, key: str, path: str, problems: Problems,
         required: bool = False) -> str | None:
    value = parent.get(key)
    if type(value) is str and 0 < len(value) <= MAX_TEXT:
        return value
    if value is None or value == "":
        if required:
            problems.add(path, "required")
        return None
    if not isinstance(value, str):
        problems.add(path, f"expected a string, got {type_name(value)}")
        return None
    if len(value) > MAX_TEXT:
        problems.add(path, f"longer than {MAX_TEXT} characters")
        return None
    return value


def origins(value: Any, problems: Problems) -> list[str]:
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


def runners(value: Any, problems: Problems) -> list[dict]:
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


def numbers(value: Any, problems: Problems) -> list[float]:
    if type(value) is list and all(type(item) is float for item in value):
        return value
    if value is None:
        return []
    if not isinstance(value, list):
        value = [value]  # a bare number
    found = []
    for position, item in enumerate(value):
        checked = number(item, f"metric.benchmark_values[{position}]", problems,
                         missing=math.nan)
        if checked is not None:
            found.append(checked)
    return found


def number(value: Any, path: str, problems: Problems,
           missing: float | None = None) -> float | None:
    if value is None:
        return missing
    if isinstance(value, bool):
        problems.add(path, "expected a number, got a boolean")
        return None
    try:
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            return float(value)  # "inf", "-inf", "nan", "1.5"
    except OverflowError:
        problems.add(path, f"{value!r:.40} is beyond the range of a 64-bit float")
        return None
    except ValueError:
        pass
    problems.add(path, f"expected a number, got {type_name(value)} {value!r:.40}")
    return None


def strings(value: Any, problems: Problems) -> list[str]:
    """String results (metric.extra_info.benchmark_values); numbers become text."""
    if value is None:
        return []
    if not isinstance(value, list):
        value = [value]
    if not all(isinstance(item, str | int | float) and not isinstance(item, bool)
               for item in value):
        problems.add("metric.extra_info.benchmark_values", "expected a list of strings")
        return []
    return [str(item) for item in value]


def integer(value: Any, path: str, problems: Problems, default: int) -> int:
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        problems.add(path, "expected an integer, got a boolean")
        return default
    found = None
    if isinstance(value, int):
        found = value
    elif isinstance(value, float) and value.is_integer():
        found = int(value)
    elif isinstance(value, str):
        with contextlib.suppress(ValueError):
            found = int(value)
    if found is None:
        problems.add(path, f"expected an integer, got {type_name(value)} {value!r:.40}")
        return default
    if not BIGINT[0] <= found <= BIGINT[1]:
        problems.add(path, f"{shown_int(found)} is beyond the 64-bit range: integers go from "
                     f"{BIGINT[0]} to {BIGINT[1]}")
        return default
    return found


def timestamp(value: Any, path: str, problems: Problems) -> int:
    """Unix seconds; also accepts numeric strings and ISO 8601. Missing means now. Only the
    times of benchsite.dates are accepted."""
    if value is None or value == "":
        return int(datetime.now(UTC).timestamp())
    seconds = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value if isinstance(value, float) or abs(value) < 2**63 else math.inf
    elif isinstance(value, str):
        try:
            seconds = float(value)
        except ValueError:
            try:
                parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                pass
            else:
                reason = dates.problem(parsed)
                if reason is None:
                    aware = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
                    return int(aware.timestamp())
                problems.add(path, reason)
                return 0
    if seconds is None:
        problems.add(path, f"expected Unix seconds or an ISO 8601 time, got {value!r:.40}")
        return 0
    reason = dates.timestamp_problem(seconds)
    if reason is not None:
        problems.add(path, reason)
        return 0
    return int(seconds)


def storable(value: Any, path: str, problems: Problems, depth: int = 1) -> None:
    """Report what no column can hold, anywhere in `value` (a decoded JSON value at nesting
    level `depth`, at `path` in its record): text with a NUL character or a lone UTF-16
    surrogate, an integer beyond 64 bits (but in FLOAT_PATHS), nesting deeper than
    MAX_DEPTH."""
    if isinstance(value, str):
        if reason := text_problem(value):
            problems.add(path, reason)
    elif isinstance(value, bool | float) or value is None:
        return
    elif isinstance(value, int):
        if not JSON_INT[0] <= value <= JSON_INT[1] and not path.startswith(FLOAT_PATHS):
            problems.add(path, f"{shown_int(value)} is beyond the 64-bit range; send it as a "
                         "string or a float")
    elif depth > MAX_DEPTH:
        problems.add(path, f"nested deeper than {MAX_DEPTH} levels")
    elif isinstance(value, dict):
        for key, item in value.items():
            if reason := text_problem(key):
                problems.add(f"{path}.{ascii(key)}" if path else ascii(key), f"the key {reason}")
                continue
            storable(item, f"{path}.{key}" if path else key, problems, depth + 1)
    elif isinstance(value, list):
        for position, item in enumerate(value):
            storable(item, f"{path}[{position}]", problems, depth + 1)


def shown_int(value: int) -> str:
    """An integer for a message (Python refuses to write one of over 4300 digits)."""
    return str(value) if value.bit_length() <= 256 else f"an integer of {value.bit_length()} bits"


def text_problem(value: str) -> str | None:
    """Why `value` cannot be stored as text, or None."""
    if "\0" in value:
        return "contains a NUL character (\\u0000), which no text column holds"
    try:
        value.encode()
    except UnicodeEncodeError:
        return "contains a lone UTF-16 surrogate (an escape like \\ud800 without its pair)"
    return None


def label(value: Any) -> str:
    """A device or arch name as stored: text of at most MAX_TEXT characters."""
    if type(value) is str and len(value) <= MAX_TEXT:
        return value
    return str(value)[:MAX_TEXT]


def type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), type(value).__name__)
