"""A cell's outcome, and the record that keeps a cell that did not run visible.

A skipped or failed cell becomes one "status" record: its status as a string result (in
metric.extra_info.benchmark_values, with no numeric benchmark_values, as real writers put
non-numeric results) and the reason or error beside it.
"""

from __future__ import annotations

from typing import Any

from runner.contract.metrics import string_metric

OK, SKIPPED, FAILED = "ok", "skipped", "failed"
STATUSES = (OK, SKIPPED, FAILED)
STATUS_METRIC = "status"


def status_metric(status: str, detail: str | None) -> dict[str, Any]:
    """The "status" metric of a cell that was skipped (with the reason) or failed (with the
    error)."""
    if status not in (SKIPPED, FAILED):
        raise ValueError(f"status {status!r}: only a skipped or failed cell has a status record")
    return string_metric(STATUS_METRIC, status,
                         **{"error" if status == FAILED else "reason": detail or ""})
