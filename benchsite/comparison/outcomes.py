"""Pass/fail results (a model's accuracy check: "pass", "fail_accuracy", ...), as the PyTorch
HUD counts them: what detection raises when a pass becomes a failure, and what a comparison
of two commits judges such a series by (and a cell's status series the same way). Shown as
1 for a pass (a cell that ran) and 0 for a failure: higher is better (`DIRECTION`)."""

from __future__ import annotations

from benchsite.comparison.directions import HIGHER
from benchsite.results.ingest.summaries import PASS_VALUES
from runner.contract.status import SKIPPED

# Which way is better for a pass/fail series and a cell's status: a pass (1) over a failure.
DIRECTION = HIGHER
# String results that are neither a pass nor a failure.
NOT_JUDGED = (SKIPPED, "")


def text(values) -> str:
    """A result's outcome: the first of its string values."""
    return str(values[0]) if isinstance(values, list) and values else str(values or "")


def passes(values) -> bool | None:
    """True for a pass, False for a failure, None for neither (skipped, empty)."""
    value = text(values)
    if value in NOT_JUDGED:
        return None
    return value in PASS_VALUES
