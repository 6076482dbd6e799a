"""The state of the machine while it measures (pyperf's habit), so a noisy run can be
explained: CPU model, governor and frequency, load average, and for CUDA the GPU's clocks,
power limit, temperature and driver. Only what can be read is reported; nothing here fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

CPUFREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq")
# nvidia-smi fields -> our names (units: MHz, W, degrees C)
GPU_FIELDS = {
    "clocks.sm": "gpu_sm_clock_mhz",
    "clocks.mem": "gpu_mem_clock_mhz",
    "clocks.max.sm": "gpu_max_sm_clock_mhz",
    "power.limit": "gpu_power_limit_w",
    "power.draw": "gpu_power_draw_w",
    "temperature.gpu": "gpu_temperature_c",
    "clocks_event_reasons.active": "gpu_throttle_reasons",
    "driver_version": "gpu_driver",
}
NVIDIA_SMI_TIMEOUT_S = 10


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, rounded."""
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:
        return None


def machine_state(device: str) -> dict[str, Any]:
    """What can be read now of the CPU (and of the GPU when `device` is cuda)."""
    state: dict[str, Any] = {"load_avg": load_average(),
                             "cpu_governor": _read(CPUFREQ / "scaling_governor"),
                             "usable_cpus": len(os.sched_getaffinity(0))}
    current = _read(CPUFREQ / "scaling_cur_freq")
    if current and current.isdigit():
        state["cpu_mhz"] = round(int(current) / 1000)
    if device == "cuda":
        state.update(gpu_state())
    return {key: value for key, value in state.items() if value is not None}


def gpu_state() -> dict[str, Any]:
    """The first GPU's clocks, power, temperature and driver from nvidia-smi, if present."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {}
    try:
        output = subprocess.run(
            [smi, "--id=0", f"--query-gpu={','.join(GPU_FIELDS)}",
             "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    values = [value.strip() for value in output.strip().split(",")]
    if len(values) != len(GPU_FIELDS):
        return {}
    return {name: _number(value) for name, value in zip(GPU_FIELDS.values(), values,
                                                        strict=True)
            if value and value not in ("[N/A]", "[Not Supported]")}


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _number(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text
