"""`python -m runner kernels`, and a kernels spec through `python -m runner run`."""

import json

import pytest
from conftest import measured

from runner.cli import main

FAST = ["--samples", "2", "--warmup", "0", "--min-sample-time", "0.0005"]


def test_list_shows_formulas_and_why_backends_are_unavailable(capsys):
    assert main(["kernels", "--list", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "    backward  read dy (M*N*s) + read y (M*N*s) + write dx (M*N*s)" in out
    assert "  eager      available" in out
    assert ("  quack      unavailable: quack is not installed (pip install quack-kernels); "
            "quack needs CUDA; the device is cpu") in out


def test_bad_options_exit_2_listing_every_problem(capsys):
    assert main(["kernels", "softmax", "--shape", "3y4", "--backend", "triton", "--atol",
                 "0.1", "--device", "cpu"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: command line: 3 problems:")
    assert "backends[0]: 'triton' is not one of eager, compiled, liger, quack" in error
    assert "tolerance.rtol: required with the other" in error


@pytest.mark.torch
def test_run_prints_a_table_and_writes_records(tmp_path, capsys):
    from runner.contract.record import problems

    output = tmp_path / "kernels.json"
    code = main(["kernels", "rms_norm", "--direction", "backward", "--shape", "8x16",
                 "--backend", "eager", "liger", "--device", "cpu", "--dtype", "float32",
                 *FAST, "-o", str(output)])
    assert code == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["kernel", "direction", "shape", "backend"]
    assert lines[1].split()[:4] == ["rms_norm", "backward", "8x16", "eager"]
    assert "skipped: liger_kernel is not installed" in lines[2]
    assert "3 records written" in out and measured(out, skipped=1) == 1
    records = json.loads(output.read_text())
    assert problems(records) == []


@pytest.mark.torch
def test_a_kernels_spec_runs_through_runner_run(tmp_path, capsys):
    spec = tmp_path / "k.yml"
    spec.write_text("family: kernels\nkernels: [cross_entropy]\nshapes: [[8, 16]]\n"
                    "backends: [eager, quack]\ndevice: cpu\ndtype: float32\n"
                    "timing: {samples: 2, warmup_s: 0, min_sample_s: 0.0005}\n")
    output = tmp_path / "out.json"
    assert main(["run", str(spec), "-o", str(output)]) == 0
    out = capsys.readouterr().out
    assert measured(out, skipped=2) == 2
    metrics = [r["metric"]["name"] for r in json.loads(output.read_text())]
    assert metrics == ["latency", "memory_bandwidth", "status"] * 2
