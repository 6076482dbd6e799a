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
