"""What a family's `plan` and `run` hand back (see runner.families): a planned cell, and the
outcome of running one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Planned:
    key: str  # unique within the spec, readable: shown in job pages and progress bars
    cell: dict[str, Any]  # JSON-serialisable; what `run` receives, possibly in another process


@dataclass
class Outcome:
    status: str  # runner.contract.status: OK, SKIPPED or FAILED
    records: list[dict[str, Any]] = field(default_factory=list)  # OSS v3 records
    error: str = ""  # why it was skipped, or the traceback that failed it
    measured_s: float | None = None  # time inside timed calls
    unstable: bool = False  # its speedup's interval stayed wider than the target (paired)
    detail: Any = None  # the family's own result object, for its reports
