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
# What a cell reads of the GPU at its start and end (gpu_clocks).
CLOCK_FIELDS = ("gpu_sm_clock_mhz", "gpu_mem_clock_mhz", "gpu_temperature_c",
                "gpu_power_draw_w", "gpu_throttle_reasons")
# Clock event ("throttle") reasons that slow the clocks under load: software power cap, hardware
# slowdown, software and hardware thermal slowdown, power brake. Idle, application clocks,
# sync boost and display clocks are settings or rest, not throttling.
THROTTLING_NAMES = {0x4: "software power cap", 0x8: "hardware slowdown",
                    0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown",
                    0x80: "power brake"}
THROTTLING = sum(THROTTLING_NAMES)
CLOCKS_MOVED_SHARE = 0.10  # of the SM clock between a cell's start and end


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


def gpu_clocks() -> dict[str, Any]:
    """The first GPU's SM and memory clocks, temperature, power draw and throttle reasons
    now: through NVML when nvidia-ml-py is installed (no subprocess), else nvidia-smi."""
    state = _nvml_clocks()
    if state is None:
        state = {name: value for name, value in gpu_state().items() if name in CLOCK_FIELDS}
    return state


def _nvml_clocks() -> dict[str, Any] | None:
    try:
        import pynvml  # nvidia-ml-py, on GPU images; optional
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
            reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or (
                pynvml.nvmlDeviceGetCurrentClocksThrottleReasons)
            return {
                "gpu_sm_clock_mhz": float(pynvml.nvmlDeviceGetClockInfo(
                    gpu, pynvml.NVML_CLOCK_SM)),
                "gpu_mem_clock_mhz": float(pynvml.nvmlDeviceGetClockInfo(
                    gpu, pynvml.NVML_CLOCK_MEM)),
                "gpu_temperature_c": float(pynvml.nvmlDeviceGetTemperature(
                    gpu, pynvml.NVML_TEMPERATURE_GPU)),
                "gpu_power_draw_w": pynvml.nvmlDeviceGetPowerUsage(gpu) / 1000,
                "gpu_throttle_reasons": f"0x{reasons(gpu):016x}",  # as nvidia-smi writes it
            }
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        return None


def clocks_moved(start: dict[str, Any], end: dict[str, Any],
                 share: float = CLOCKS_MOVED_SHARE) -> str | None:
    """Why a cell's GPU clocks did not hold between two gpu_clocks reads: the SM clock moved
    by more than `share`, or either read found the GPU throttling; None when they held (or
    nothing could be read)."""
    reasons = []
    before, after = start.get("gpu_sm_clock_mhz"), end.get("gpu_sm_clock_mhz")
    if (isinstance(before, float) and isinstance(after, float) and before > 0
            and abs(after - before) / before > share):
        reasons.append(f"SM clock {before:.0f} -> {after:.0f} MHz")
    throttled = (_throttling(start) | _throttling(end)) & THROTTLING
    if throttled:
        names = ", ".join(name for bit, name in THROTTLING_NAMES.items() if throttled & bit)
        reasons.append(f"throttle reasons 0x{throttled:x} ({names})")
    return "; ".join(reasons) or None


def _throttling(state: dict[str, Any]) -> int:
    try:
        return int(str(state.get("gpu_throttle_reasons", "0")), 16)
    except ValueError:
        return 0


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
