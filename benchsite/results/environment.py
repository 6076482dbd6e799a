"""A run's environment: what it ran on, as a flat, normalised fingerprint and its hash.

Derived from what records already carry (the OSS format's `runners` and `dependencies`, and
the runner's `machine_at_start`): each dependency's version and git sha, the CUDA or ROCm
runtime, the GPU and CPU models and count, the driver, power limit, max SM clock and CPU
governor, Python, the platform (kernel) and a container image digest where given. Only
what stays the same while a machine is unchanged is kept: loads, temperatures, current
clocks and free memory are not an environment.

Keys are names a perf engineer reads ("torch", "cuda", "driver"); values are text, so a
fingerprint compares, diffs and hashes the same whatever the upload's key order or number
formatting (700 and 700.0 W are one power limit).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

# runners[0] fields -> fingerprint keys
RUNNER_FIELDS = {"gpu_info": "gpu", "gpu_count": "gpu_count", "cpu_info": "cpu",
                 "cpu_count": "cpu_count"}
# runners[0].extra_info fields -> keys
RUNNER_EXTRA_FIELDS = {"python": "python", "platform": "platform",
                       "gpu_capability": "gpu_capability",
                       "image_digest": "image", "container_image_digest": "image",
                       "container_image": "image"}
# runners[0].extra_info.machine_at_start fields (runner.engine.machine_state) -> keys
MACHINE_FIELDS = {"gpu_driver": "driver", "gpu_power_limit_w": "power_limit_w",
                  "gpu_max_sm_clock_mhz": "max_sm_clock_mhz", "cpu_governor": "cpu_governor"}
# a dependency's extra_info fields that are environments of their own (torch's CUDA)
RUNTIME_FIELDS = {"cuda": "cuda", "cuda_version": "cuda", "hip": "rocm", "rocm": "rocm",
                  "cudnn": "cudnn", "triton": "triton"}
# Said as unchanged when a change leaves them as they were: what a reader rules out first.
NOTABLE = ("torch", "cuda", "rocm", "driver", "gpu", "image")
SHA_SHOWN = 12
MAX_VALUE = 200


@dataclass(frozen=True)
class Change:
    key: str
    before: str | None  # None: absent
    after: str | None

    def __str__(self) -> str:
        if self.before is None:
            return f"{self.key} {self.after} (new)"
        if self.after is None:
            return f"{self.key} {self.before} (gone)"
        return f"{self.key} {self.before} -> {self.after}"

    def as_json(self) -> dict[str, str | None]:
        return {"key": self.key, "before": self.before, "after": self.after}


def fingerprint(runners: Any, dependencies: Any) -> dict[str, str]:
    """The environment of a run with these `runners` and `dependencies`, as key -> text."""
    found: dict[str, str] = {}
    runner = runners[0] if isinstance(runners, list) and runners else {}
    if isinstance(runner, dict):
        _take(found, runner, RUNNER_FIELDS)
        extra = runner.get("extra_info")
        if isinstance(extra, dict):
            _take(found, extra, RUNNER_EXTRA_FIELDS)
            machine = extra.get("machine_at_start")
            if isinstance(machine, dict):
                _take(found, machine, MACHINE_FIELDS)
    if isinstance(dependencies, dict):
        for name in sorted(dependencies, key=str):
            entry = dependencies[name]
            if isinstance(entry, dict):
                version = _text(entry.get("version"))
                sha = _text(entry.get("sha"))
                if sha:
                    version = f"{version} ({sha[:SHA_SHOWN]})" if version else sha[:SHA_SHOWN]
                if version:
                    found[_text(name) or "?"] = version
                extra = entry.get("extra_info")
                if isinstance(extra, dict):
                    _take(found, extra, RUNTIME_FIELDS)
            elif (version := _text(entry)):  # {"torch": "2.13.0"}
                found[_text(name) or "?"] = version
    return dict(sorted(found.items()))


def environment_hash(environment: dict[str, str]) -> str:
    """A stable hash of a fingerprint ("" for an empty one: nothing known to compare)."""
    if not environment:
        return ""
    canonical = json.dumps(environment, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def environment_fields(runners: Any, dependencies: Any) -> dict[str, Any]:
    """A run's `environment` and `environment_hash`, for its model's constructor."""
    environment = fingerprint(runners, dependencies)
    return {"environment": environment, "environment_hash": environment_hash(environment)}


def diff(before: dict[str, str], after: dict[str, str]) -> list[Change]:
    """What differs between two fingerprints, notable keys first, then by name."""
    keys = sorted(set(before) | set(after), key=_order)
    return [Change(key, before.get(key), after.get(key)) for key in keys
            if before.get(key) != after.get(key)]


def describe(changes: list[Change], before: dict[str, str], after: dict[str, str]) -> str:
    """'torch 2.11.0.dev20261120 -> 2.11.0.dev20261121; driver, cuda unchanged'."""
    if not changes:
        return "no change"
    changed = {change.key for change in changes}
    same = [key for key in NOTABLE if key not in changed and key in before
            and before.get(key) == after.get(key)]
    text = "; ".join(str(change) for change in changes)
    return f"{text}; {', '.join(same)} unchanged" if same else text


def _order(key: str) -> tuple[int, str]:
    return (NOTABLE.index(key) if key in NOTABLE else len(NOTABLE), key)


def _take(found: dict[str, str], source: dict, fields: dict[str, str]) -> None:
    for field, key in fields.items():
        value = _text(source.get(field))
        if value and key not in found:
            found[key] = value


def _text(value: Any) -> str:
    """A value as fingerprint text: numbers without a trailing .0, text stripped."""
    if value is None or isinstance(value, bool | dict | list):
        return "" if not isinstance(value, bool) else str(value).lower()
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        return f"{value:g}" if value != int(value) else str(int(value))
    return str(value).strip()[:MAX_VALUE]
