"""The machine's state in the records: what can be read, and nothing that fails."""

import subprocess

from runner.engine import machine_state as machine


def test_the_cpu_state_has_the_load_average_and_the_usable_cpus():
    state = machine.machine_state("cpu")
    assert len(state["load_avg"]) == 3 and state["usable_cpus"] >= 1
    assert not any(key.startswith("gpu_") for key in state)


def test_the_gpu_state_comes_from_nvidia_smi(monkeypatch):
    monkeypatch.setattr(machine.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    line = "1980, 2619, 1980, 700.00, 121.5, 41, 0x0000000000000000, 570.86.15\n"
    monkeypatch.setattr(machine.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, 0, stdout=line))
    assert machine.gpu_state() == {
        "gpu_sm_clock_mhz": 1980.0, "gpu_mem_clock_mhz": 2619.0, "gpu_max_sm_clock_mhz": 1980.0,
        "gpu_power_limit_w": 700.0, "gpu_power_draw_w": 121.5, "gpu_temperature_c": 41.0,
        "gpu_throttle_reasons": "0x0000000000000000", "gpu_driver": "570.86.15"}
    assert set(machine.machine_state("cuda")) >= {"load_avg", "gpu_sm_clock_mhz"}


def test_no_nvidia_smi_or_a_failing_one_gives_nothing(monkeypatch):
    monkeypatch.setattr(machine.shutil, "which", lambda name: None)
    assert machine.gpu_state() == {}
    monkeypatch.setattr(machine.shutil, "which", lambda name: "/usr/bin/nvidia-smi")

    def fail(*args, **kwargs):
        raise subprocess.TimeoutExpired("nvidia-smi", 10)

    monkeypatch.setattr(machine.subprocess, "run", fail)
    assert machine.gpu_state() == {}


def test_a_cells_gpu_clocks_come_from_nvidia_smi_without_nvml(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails: not installed
    monkeypatch.setattr(machine.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    line = "1755, 2619, 1980, 700.00, 390.2, 63, 0x0000000000000004, 570.86.15\n"
    monkeypatch.setattr(machine.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, 0, stdout=line))
    assert machine.gpu_clocks() == {
        "gpu_sm_clock_mhz": 1755.0, "gpu_mem_clock_mhz": 2619.0, "gpu_power_draw_w": 390.2,
        "gpu_temperature_c": 63.0, "gpu_throttle_reasons": "0x0000000000000004"}


def test_a_cells_gpu_clocks_come_from_nvml_when_installed(monkeypatch):
    import sys
    import types

    nvml = types.SimpleNamespace(
        NVML_CLOCK_SM=0, NVML_CLOCK_MEM=1, NVML_TEMPERATURE_GPU=0, NVMLError=RuntimeError,
        nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda index: "gpu0",
        nvmlDeviceGetClockInfo=lambda gpu, which: (1980, 2619)[which],
        nvmlDeviceGetTemperature=lambda gpu, sensor: 41,
        nvmlDeviceGetPowerUsage=lambda gpu: 121_500,
        nvmlDeviceGetCurrentClocksEventReasons=lambda gpu: 0x1)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setattr(machine.subprocess, "run", None)  # no subprocess
    assert machine.gpu_clocks() == {
        "gpu_sm_clock_mhz": 1980.0, "gpu_mem_clock_mhz": 2619.0, "gpu_temperature_c": 41.0,
        "gpu_power_draw_w": 121.5, "gpu_throttle_reasons": "0x0000000000000001"}


def test_clocks_moved_by_a_share_of_the_sm_clock_or_throttling_are_named():
    steady = {"gpu_sm_clock_mhz": 1980.0, "gpu_throttle_reasons": "0x0000000000000000"}
    idle = {"gpu_sm_clock_mhz": 1900.0, "gpu_throttle_reasons": "0x0000000000000001"}
    assert machine.clocks_moved(steady, idle) is None  # 4%, and idle is not throttling
    assert machine.clocks_moved(steady, {}) is None  # nothing read: nothing to tell
    assert machine.clocks_moved(steady, {"gpu_sm_clock_mhz": 1410.0}) == (
        "SM clock 1980 -> 1410 MHz")
    hot = {"gpu_sm_clock_mhz": 1950.0, "gpu_throttle_reasons": "0x0000000000000024"}
    assert machine.clocks_moved(steady, hot) == (
        "throttle reasons 0x24 (software power cap, software thermal slowdown)")
