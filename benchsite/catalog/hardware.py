"""What each queue's workers have (setting BENCH_QUEUE_HARDWARE), and which cells they skip.

The rules are the runner's (runner.engine.torch_devices.device_problem and Requirements.unmet),
applied to a described machine instead of the one running the check.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from runner.quant.recipes import Requirements

HARDWARE_KEYS = {"device", "capability", "packages"}


@dataclass(frozen=True)
class QueueHardware:
    queue: str
    device: str  # "cpu", or "cuda" for GPU machines (which run cpu cells too)
    capability: tuple[int, int] | None = None  # CUDA compute capability
    packages: frozenset[str] = frozenset()  # optional modules the workers have

    def describe(self) -> str:
        parts = [self.device]
        if self.capability:
            parts.append(f"capability {self.capability[0]}.{self.capability[1]}")
        if self.packages:
            parts.append(f"packages {', '.join(sorted(self.packages))}")
        return ", ".join(parts)

    def skip_reason(self, device: str, requires: Requirements) -> str | None:
        """Why a cell on `device` with these requirements is skipped here; None if it runs."""
        if device not in ("cpu", "cuda"):
            return f"the runner measures on cuda and cpu, not {device}"
        if device == "cuda" and self.device != "cuda":
            return f"runs on cuda; queue {self.queue}'s workers have no GPU"
        if requires.unavailable:
            return requires.unavailable
        if device not in requires.devices:
            needed = " or ".join(sorted(requires.devices))
            return f"needs device {needed}, the cell runs on {device}"
        missing = sorted(set(requires.packages) - self.packages)
        if missing:
            return f"needs package {', '.join(missing)}, not on queue {self.queue}'s workers"
        if device == "cuda" and requires.min_capability and self.capability \
                and self.capability < requires.min_capability:
            need = ".".join(map(str, requires.min_capability))
            have = ".".join(map(str, self.capability))
            return f"needs CUDA compute capability >= {need}, queue {self.queue} has {have}"
        return None


def queue_hardware() -> dict[str, QueueHardware]:
    """Each queue of BENCH_QUEUES that BENCH_QUEUE_HARDWARE describes."""
    described = settings.BENCH_QUEUE_HARDWARE
    return {queue: _parse(queue, described[queue])
            for queue in settings.BENCH_QUEUES if queue in described}


def _parse(queue: str, data: Any) -> QueueHardware:
    def bad(problem: str) -> ImproperlyConfigured:
        return ImproperlyConfigured(f"BENCH_QUEUE_HARDWARE[{queue!r}]: {problem}")

    if not isinstance(data, Mapping) or set(data) - HARDWARE_KEYS:
        raise bad(f"must be a mapping with keys {sorted(HARDWARE_KEYS)}")
    device = data.get("device")
    if device not in ("cpu", "cuda"):
        raise bad(f"device {device!r}: must be cpu or cuda")
    capability = None
    if data.get("capability"):
        found = re.fullmatch(r"(\d+)\.(\d+)", str(data["capability"]))
        if not found:
            raise bad(f'capability {data["capability"]!r}: must look like "9.0"')
        capability = (int(found[1]), int(found[2]))
    packages = data.get("packages") or []
    if not isinstance(packages, list):
        raise bad("packages: must be a list of module names")
    return QueueHardware(queue, device, capability, frozenset(map(str, packages)))
