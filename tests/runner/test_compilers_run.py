"""Running the matrix: the CLI's results.jsonl and records, resume, profiles, OSS records."""

import json

import pytest

from runner.cli import main as runner_main
from runner.compilers import child, models, records
from runner.compilers.matrix import Config
from runner.contract.record import problems
from runner.engine.paired import PairedTiming
from runner.engine.run_context import RunContext

HELPERS = "tests.runner.experiment_models"
CONTEXT = RunContext(cpu_info="Test CPU", cpu_count=2, mem_gb=8.0, avail_mem_gb=4.0,
                     gpu_info=None, gpu_count=0, gpu_mem_gb=None, avail_gpu_mem_gb=None,
                     gpu_capability=None, torch_version="2.13.0", torch_sha=None,
                     cuda_version=None, torchao_version=None)
LINE_KEYS = {"model", "experiment", "repeat", "iterations_per_run", "metrics", "timestamp",
             "verification_code"}


def tiny_config(tmp_path, backend="eager", **overrides) -> Config:
    values = dict(model=models.custom(f"{HELPERS}:tiny"), backend=backend, test="eval",
                  dtype="float32", device="cpu", batch_size=None, repeat=2,
                  iterations_per_run=2, verify=True, dump_pytorch_profiles=False,
                  timeout_s=60.0, output_dir=str(tmp_path), threads=1)
    return Config(**{**values, **overrides})


def compilers(tmp_path, *args) -> int:
    return runner_main(["compilers", "--model", f"{HELPERS}:tiny", "--device", "cpu",
                        "--repeat", "2", "--threads", "1", "--verify",
                        "--output-dirname", str(tmp_path), *args])


def lines(path):
    return [json.loads(text) for text in path.read_text().splitlines()]


@pytest.mark.torch
def test_cli_writes_results_and_records_then_resumes(tmp_path, capsys):
    assert compilers(tmp_path, "--backend", "eager", "--backend", "aot_eager",
                       "--test", "eval") == 0
    first = lines(tmp_path / "results.jsonl")
    assert [line["experiment"]["backend"] for line in first] == ["eager", "aot_eager"]
    line = first[1]
    assert set(line) == LINE_KEYS and line["verification_code"] == "PASS"
    assert line["model"] == {"suite_name": "custom", "model_name": "tiny"}
    assert {"accelerator": "cpu", "backend": "aot_eager", "test": "eval", "dtype": "float32",
            "batch_size": None}.items() <= line["experiment"].items()
    metrics = line["metrics"]
    assert len(metrics["total_time"]) == len(metrics["per_iter_time"]) == 2
    assert metrics["graphs"] == 1 and metrics["graph_breaks"] == 0
    assert metrics["compile_time"] >= 0 and "frames" in metrics["dynamo_counters"]
    names = {r["metric"]["name"] for r in json.loads((tmp_path / "records.json").read_text())}
    assert {"speedup", "accuracy", "compilation_latency", "abs_latency"} <= names

    capsys.readouterr()
    assert compilers(tmp_path, "--backend", "eager", "--backend", "aot_eager",
                       "--test", "eval", "--test", "train") == 0
    out = capsys.readouterr().out
    assert "resuming: 2 of 4 configurations already in" in out and "4 of 4 configurations" in out
    second = lines(tmp_path / "results.jsonl")
    assert second[:2] == first and [x["experiment"]["test"] for x in second[2:]] == ["train"] * 2
    stored = json.loads((tmp_path / "records.json").read_text())
    assert {(r["benchmark"]["mode"], r["model"]["backend"]) for r in stored
            if r["metric"]["name"] == "speedup"} == {("inference", "aot_eager"),
                                                      ("training", "aot_eager")}

    # Without eager in the matrix, the baseline runs as such and stays out of the file.
    assert compilers(tmp_path, "--no-resume", "--backend", "aot_eager", "--test", "eval") == 0
    [only] = lines(tmp_path / "results.jsonl")
    assert only["experiment"]["backend"] == "aot_eager"
    stored = json.loads((tmp_path / "records.json").read_text())
    assert any(r["metric"]["name"] == "speedup" for r in stored)


@pytest.mark.torch
def test_a_spec_runs_through_runner_run(tmp_path, capsys):
    spec = tmp_path / "spec.yml"
    spec.write_text(f"family: compilers\nmodels: ['{HELPERS}:broken', '{HELPERS}:tiny']\n"
                    "backends: [eager]\ntests: [eval]\nrepeat: 1\nverify: true\nthreads: 1\n"
                    "output_dir: profiles\n")
    out = tmp_path / "out.json"
    assert runner_main(["run", str(spec), "-o", str(out)]) == 1  # one configuration failed
    printed = capsys.readouterr().out
    assert "failed   custom/broken/eager" in printed and "ok       custom/tiny/eager" in printed
    accuracy = {r["model"]["name"]: r["metric"]["extra_info"]["benchmark_values"]
                for r in json.loads(out.read_text()) if r["metric"]["name"] == "accuracy"}
    assert accuracy == {"broken": ["eager_fail_to_run"], "tiny": ["pass"]}


@pytest.mark.torch
def test_profiles_per_repetition_in_seed_layout(tmp_path):
    config = tiny_config(tmp_path, dump_pytorch_profiles=True, verify=False)
    result = child.run(config)
    stem = config.file_stem
    for repetition in ("0", "1"):
        folder = tmp_path / "tiny" / repetition
        trace = json.loads((folder / f"trace-{stem}.json").read_text())
        assert trace["traceEvents"]
        assert "aten::linear" in (folder / f"pytorch-profile-{stem}.txt").read_text()
    combined = (tmp_path / "tiny" / f"pytorch-profile-{stem}.txt").read_text()
    assert "repetition 0" in combined and "repetition 1" in combined
    assert len(result["metrics"]["pytorch_profiles"]) == 2


@pytest.mark.torch
def test_inductor_compiles_verifies_and_counts_graphs(tmp_path):
    result = child.run(tiny_config(tmp_path, backend="inductor", repeat=1))
    metrics = result["metrics"]
    assert result["verification_code"] == "PASS", metrics.get("error")
    assert metrics["graphs"] == 1 and metrics["compile_time"] > 0
    assert metrics["peak_memory_kind"] == "cpu_peak_rss_rise"


def test_records_have_the_hud_compiler_shape(tmp_path):
    config = tiny_config(tmp_path, backend="inductor", test="train")
    eager = {"metrics": {"per_iter_time": [0.004, 0.006], "peak_memory_mb": 30.0}}
    line = {"repeat": 2, "iterations_per_run": 2, "verification_code": "FAIL",
            "metrics": {"per_iter_time": [0.002, 0.0025], "compile_time": 3.5,
                        "paired": PairedTiming((4.0,) * 24, (2.0,) * 24, (2.5, 2.0) * 3,
                                               target=0.02).to_dict(),
                        "peak_memory_mb": 20.0, "peak_memory_kind": "cpu_peak_rss_rise",
                        "graph_breaks": 1}}
    found = records.build(config, line, eager, CONTEXT)
    by_name = {r["metric"]["name"]: r for r in found}
    assert set(by_name) == {"abs_latency", "speedup", "compilation_latency", "peak_memory",
                            "compression_ratio", "graph_breaks", "accuracy"}
    speedup = by_name["speedup"]
    assert speedup["benchmark"] == {"name": "TorchInductor", "mode": "training",
                                    "dtype": "float32", "extra_info": {
                                        "device": "cpu", "arch": "Test CPU",
                                        "batch_size": None}}
    assert speedup["model"] == {"name": "tiny", "type": "model", "backend": "inductor",
                                "origins": ["custom"]}
    assert speedup["metric"]["benchmark_values"] == [2.5, 2.0] * 3  # each pair's ratio
    info = speedup["metric"]["extra_info"]
    assert (info["ci_low"], info["ci_high"], info["pairs"]) == (2.0, 2.5, 6)
    assert info["unstable"] and info["eager_ms"] == 4.0
    assert by_name["compression_ratio"]["metric"]["benchmark_values"] == [1.5]
    assert by_name["compilation_latency"]["metric"]["benchmark_values"] == [3.5]
    accuracy = by_name["accuracy"]["metric"]
    assert "benchmark_values" not in accuracy  # a string result: no numeric values
    assert accuracy["extra_info"]["benchmark_values"] == ["fail_accuracy"]
    assert problems(found) == []


def test_failures_are_visible_as_accuracy_and_unverified_runs_have_none(tmp_path):
    config = tiny_config(tmp_path, verify=False)
    timed_out = {"repeat": 2, "iterations_per_run": 2, "verification_code": "VERIFIER_DIDNT_RUN",
                 "metrics": {"error": "timed out after 60 s", "timed_out": True}}
    [record] = records.build(config, timed_out, None, CONTEXT)
    assert record["metric"]["extra_info"]["benchmark_values"] == ["timeout"]
    ran = {"repeat": 2, "iterations_per_run": 2, "verification_code": "VERIFIER_SKIPPED",
           "metrics": {"per_iter_time": [0.1, 0.1]}}
    assert [r["metric"]["name"] for r in records.build(config, ran, None, CONTEXT)] == [
        "abs_latency"]
