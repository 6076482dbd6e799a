"""`python -m runner run`: dry run, outputs, exit codes, Ctrl-C and upload."""

import csv
import json
import subprocess
import sys
import textwrap

import pytest
from conftest import FIXTURES, measured

from runner.cli import main

SPEC = """\
quantization_config_recipe_names: ["int8wo", "float8dq-row"]
output_dir: "artifacts"
model_params:
  matrix_shapes: [{name: custom, shapes: [[16, 64, 32], [32, 64, 32]]}]
  torch_compile_mode: false
  device: cpu
"""
# A wide CI target: tiny layers timed for milliseconds are never stable at the default 2%.
FAST_OPTIONS = ["--samples", "2", "--warmup", "0", "--min-sample-time", "0.0005",
                "--budget", "0.05", "--max-pairs", "12", "--ci-target", "0.5"]


@pytest.fixture
def spec(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the spec's output_dir is relative to the current directory
    path = tmp_path / "spec.yml"
    path.write_text(SPEC)
    return path


def test_dry_run_lists_cells_without_importing_torch():
    code = textwrap.dedent(f"""\
        import sys
        from runner.cli import main
        assert main(["run", {str(FIXTURES / "cpu_small.yml")!r}, "--dry-run"]) == 0
        assert "torch" not in sys.modules, "dry run imported torch"
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "    1  cpu_small/linear/baseline/256-512-512/bfloat16/cpu/eager"
    assert lines[-1] == "16 cells"


def test_spec_errors_exit_2_naming_the_file(tmp_path, capsys):
    path = tmp_path / "bad.yml"
    path.write_text("quantization_config_recipe_names: [int9wo]\nmodel_params: {}\n")
    assert main(["run", str(path)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {path}: 2 problems:")
    assert "quantization_config_recipe_names[0]: unknown quantization recipe 'int9wo'" in error
    assert "model_params.matrix_shapes: required" in error


@pytest.mark.torch
def test_run_writes_records_csv_and_table(spec, tmp_path, capsys):
    from runner.contract.record import problems

    output, table = tmp_path / "results.json", tmp_path / "results.csv"
    assert main(["run", str(spec), "-o", str(output), "--csv", str(table), *FAST_OPTIONS]) == 0
    records = json.loads(output.read_text())
    assert problems(records) == []
    statuses = [r["metric"]["extra_info"]["benchmark_values"] for r in records
                if r["metric"]["name"] == "status"]
    assert statuses == [["skipped"], ["skipped"]]  # float8dq-row needs CUDA
    with table.open() as handle:
        assert [row["status"] for row in csv.DictReader(handle)] == ["ok", "skipped"] * 2
    printed = capsys.readouterr().out
    assert "needs device cuda, the cell runs on cpu" in printed
    assert measured(printed, skipped=2) == 2


@pytest.mark.torch
def test_a_failed_cell_makes_the_exit_status_1(spec, tmp_path, monkeypatch):
    from runner.quant import models

    def build(*args):
        raise RuntimeError("broken model")

    monkeypatch.setattr(models, "build", build)
    output = tmp_path / "results.json"
    assert main(["run", str(spec), "-o", str(output), *FAST_OPTIONS]) == 1
    errors = [r["metric"]["extra_info"].get("error") for r in json.loads(output.read_text())]
    assert errors.count("RuntimeError: broken model") == 2


@pytest.mark.torch
def test_ctrl_c_leaves_a_valid_partial_output(spec, tmp_path, monkeypatch, capsys):
    from runner.quant import execute

    real_run_cell = execute.run_cell
    started = []

    def run_cell(cell, settings):
        started.append(cell)
        if len(started) == 3:
            raise KeyboardInterrupt
        return real_run_cell(cell, settings)

    monkeypatch.setattr(execute, "run_cell", run_cell)
    output, table = tmp_path / "results.json", tmp_path / "results.csv"
    code = main(["run", str(spec), "-o", str(output), "--csv", str(table),
                 "--upload", "http://unused", "--token", "t", *FAST_OPTIONS])
    assert code == 130
    records = json.loads(output.read_text())
    assert {r["model"]["name"] for r in records} == {"int8wo-16-64-32", "float8dq-row-16-64-32"}
    with table.open() as handle:
        assert len(list(csv.DictReader(handle))) == 2
    assert "interrupted: 2 of 4 cells finished" in capsys.readouterr().err


@pytest.mark.torch
def test_upload_sends_the_records(spec, monkeypatch, capsys):
    from runner.cli import upload

    sent = {}

    def upload_records(records, server, token, metadata=None):
        sent.update(records=records, server=server, token=token, metadata=metadata)
        return upload.UploadResult(upload_id=7, records=len(records), created=True)

    monkeypatch.setattr(upload, "upload_records", upload_records)
    monkeypatch.setenv("BENCH_UPLOAD_TOKEN", "from-env")
    code = main(["run", str(spec), "--upload", "https://bench.example", "--repo", "pytorch/ao",
                 "--head-sha", "abc123", *FAST_OPTIONS])
    assert code == 0
    assert sent["server"] == "https://bench.example" and sent["token"] == "from-env"
    assert sent["metadata"] == {"repo": "pytorch/ao", "head_sha": "abc123"}
    assert len(sent["records"]) > 4
    assert f"stored as upload 7 ({len(sent['records'])} records)" in capsys.readouterr().out


def test_upload_without_a_token_is_refused_before_running(spec, monkeypatch, capsys):
    monkeypatch.delenv("BENCH_UPLOAD_TOKEN", raising=False)
    assert main(["run", str(spec), "--upload", "https://bench.example"]) == 2
    assert "--upload needs --token" in capsys.readouterr().err


def test_timing_comes_from_the_spec_and_the_options_win(spec, tmp_path, monkeypatch):
    from runner.quant import execute

    seen = []
    monkeypatch.setattr(execute, "run_cell",
                        lambda cell, settings: seen.append(settings) or execute.CellResult(
                            cell, "skipped", "not run in this test"))
    spec.write_text(spec.read_text() + "timing: {ci_target: 0.05, min_pairs: 10}\n")
    assert main(["run", str(spec), "--min-pairs", "20", "--budget", "1"]) == 0
    assert {(s.ci_target, s.min_pairs, s.budget_s) for s in seen} == {(0.05, 20, 1.0)}


def test_bad_timing_is_refused_naming_the_setting(spec, capsys):
    assert main(["run", str(spec), "--ci-target", "0", "--max-pairs", "0"]) == 2
    err = capsys.readouterr().err
    assert "timing.ci_target: must be a fraction above 0, not 0.0" in err
    assert "timing.max_pairs: must be an integer of at least 1, not 0" in err
    spec.write_text(spec.read_text() + "timing: {budget_s: -1}\n")
    assert main(["run", str(spec)]) == 2
    assert "timing.budget_s: must be a number of seconds of at least 0, not -1" in \
        capsys.readouterr().err


def test_unstable_cells_are_counted_apart(spec, monkeypatch, capsys):
    from runner.engine.paired import PairedTiming
    from runner.quant import execute

    wide = PairedTiming((1.0,) * 12, (1.0,) * 12, (0.7, 1.3, 0.8, 1.2, 0.9, 1.1))
    monkeypatch.setattr(execute, "measure_pair", lambda *args: wide)
    assert main(["run", str(spec), *FAST_OPTIONS[:-2]]) == 0
    out = capsys.readouterr().out
    assert "2 unstable, 2 skipped" in out
    assert " unstable " in out.splitlines()[2]  # the table's status column
