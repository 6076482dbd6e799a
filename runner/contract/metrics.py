"""The `metric` part of a record, as every family writes it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def number_metric(name: str, values: Iterable[float], unit: str, **extra: Any) -> dict[str, Any]:
    """A numeric result: every repetition in benchmark_values, the unit (and what else the
    family records about this value) in extra_info."""
    return {"name": str(name), "benchmark_values": [float(v) for v in values],
            "target_value": 0.0, "extra_info": {"unit": unit, **extra}}


def string_metric(name: str, value: str, **extra: Any) -> dict[str, Any]:
    """A metric whose result is text ("pass", "fail_accuracy", "skipped"): in
    extra_info.benchmark_values, with no numeric benchmark_values, as real writers put it."""
    return {"name": str(name), "target_value": 0.0,
            "extra_info": {"benchmark_values": [value], **extra}}
