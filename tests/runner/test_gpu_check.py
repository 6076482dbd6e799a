"""perf/gpu_check.py's judgement (issue 29) from canned records, without running a benchmark:
the records are the runner's own (runner.quant.records.cell_records), the speedups and
times made up, so that each target is seen to pass and to fail."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import pytest
import yaml

from runner.engine.paired import PairedTiming
from runner.engine.run_context import RunContext
from runner.engine.timing_data import TimingSettings
from runner.quant.cells import QuantCell
from runner.quant.records import cell_records
from runner.quant.results import CellResult
from runner.quant.shapes import Shape
from runner.quant.spec import parse_spec

ROOT = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("perf_gpu_check", ROOT / "perf" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


gpu_check = _module()
H100 = "NVIDIA H100 80GB HBM3"
CONTEXT = RunContext(cpu_info="test CPU", cpu_count=16, mem_gb=128.0, avail_mem_gb=100.0,
                     gpu_info=H100, gpu_count=1, gpu_mem_gb=79.0, avail_gpu_mem_gb=78.0,
                     gpu_capability="9.0", torch_version="2.11.0", torch_sha=None,
                     cuda_version="13.0", torchao_version="0.18.0")
SPEEDUPS = {"baseline": 1.0, "int8dq": 1.5, "float8dq-row": 1.8, "int8wo": 0.6}
DECODE_BOUND_MS = 4096 * 4096 * 2 / 3350e9 * 1e3  # about 0.010 ms


def paired(speedup: float, bf16_ms: float, width: float = 0.01) -> PairedTiming:
    """12 pairs spread evenly around `speedup`: the 95% interval is about ±0.6 `width`."""
    ratios = tuple(speedup * (1 + width * (i - 5.5) / 5.5) for i in range(12))
    return PairedTiming((bf16_ms,) * 48, (bf16_ms / speedup,) * 48, ratios)


def records(device="cuda", speedups=None, bf16=None, recipes=None, skipped=(), width=0.01,
            extra=None):
    """One run's records: every recipe at every shape of the device."""
    speedups, bf16 = speedups or {}, bf16 or {}
    found = []
    for shape in gpu_check.SHAPES[device]:
        for recipe in recipes or gpu_check.RECIPES[device]:
            mode = "default" if device == "cuda" else None
            cell = QuantCell("gpu_check", recipe, None, Shape("custom", *shape), "linear",
                             "bfloat16", device, mode, "results/gpu_check")
            if (recipe, shape) in skipped:
                result = CellResult(cell, "skipped", reason="needs CUDA compute capability 8.9")
            else:
                timing = paired(speedups.get((recipe, shape), SPEEDUPS[recipe]),
                                bf16.get((recipe, shape), 1.5 * DECODE_BOUND_MS * shape[0] / 32),
                                width)
                result = CellResult(cell, "ok", eager=timing,
                                    compiled=timing if mode else None,
                                    settings=TimingSettings())
            found += cell_records(result, CONTEXT)
    for record in found:
        if record["metric"]["name"] == gpu_check.SPEEDUP_METRIC:
            record["metric"]["extra_info"].update(extra or {})
    return found


def check(device="cuda", aa=None, spec=None, torchao=None, torchao_wall=None, walls=(60, 62),
          bandwidth="table", total=300.0):
    aa = aa if aa is not None else [records(device, recipes=["baseline"])] * 2
    spec = spec if spec is not None else [records(device)] * 2
    every = [record for run in [*aa, *spec] for record in run]
    gpu = gpu_check.gpu_name(every)
    return gpu_check.Check(
        device=device, shapes=gpu_check.SHAPES[device], recipes=gpu_check.RECIPES[device],
        aa_runs=[gpu_check.read_run(run) for run in aa],
        spec_runs=[gpu_check.read_run(run) for run in spec],
        spec_walls=list(walls), torchao=torchao, torchao_wall=torchao_wall, gpu=gpu,
        bandwidth_gbps=gpu_check.bandwidth_for(gpu) if bandwidth == "table" else bandwidth,
        total_s=total)


def by_name(targets, start):
    return next(target for target in targets if target.name.startswith(start))


DECODE = (32, 4096, 4096)


def test_read_run_takes_speedup_interval_bf16_time_status_and_notes():
    builds = [{"speedup": 0.9587, "ci_low": 0.95, "ci_high": 0.96}, {"speedup": 1.0059}]
    run = records(skipped=[("float8dq-row", DECODE)],
                  extra={"timing_method": "graph x20", "builds": builds})
    cells = gpu_check.read_run(run)
    int8dq = cells[("int8dq", DECODE)]
    assert int8dq.ok and int8dq.speedup == pytest.approx(1.5)
    assert int8dq.low < 1.5 < int8dq.high
    assert int8dq.bf16_ms == pytest.approx(1.5 * DECODE_BOUND_MS)
    assert int8dq.notes == {"timing_method": "graph x20", "l2": "flushed",
                            "builds": "0.959/1.006"}  # each build's speedup, in short
    skipped = cells[("float8dq-row", DECODE)]
    assert not skipped.ok and skipped.status == "skipped" and "8.9" in skipped.reason
    assert gpu_check.gpu_name(run) == H100
    assert gpu_check.bandwidth_for(H100) == 3350
    assert gpu_check.bandwidth_for("NVIDIA H100 PCIe") == 2000
    assert gpu_check.bandwidth_for("some GPU") is None


def test_agreement_is_each_inside_the_others_interval_or_within_two_percent():
    make = gpu_check.Measured
    assert gpu_check.agree(make(speedup=1.50, low=1.45, high=1.55),
                           make(speedup=1.53, low=1.52, high=1.60))
    # outside each other's interval but 1.5% apart: within 2%
    assert gpu_check.agree(make(speedup=1.50, low=1.49, high=1.51),
                           make(speedup=1.5225, low=1.52, high=1.53))
    # 3% apart, narrow intervals: no
    assert not gpu_check.agree(make(speedup=1.50, low=1.49, high=1.51),
                               make(speedup=1.545, low=1.54, high=1.55))
    # one inside the other's wide interval is not enough
    assert not gpu_check.agree(make(speedup=1.50, low=1.40, high=1.60),
                               make(speedup=1.56, low=1.55, high=1.57))
    assert not gpu_check.agree(make(speedup=1.5), make("skipped"))


def test_steady_runs_on_an_h100_pass_every_target():
    targets = gpu_check.judge(check(torchao={}, torchao_wall=90))
    assert {t.name: t.status for t in targets} == {
        "A/A error": "PASS", "A/A coverage": "PASS", "agreement": "PASS",
        "bf16 32x4096x4096 vs HBM bound": "PASS", "bf16 decode spread in a run": "PASS",
        "wall time vs torchao": "PASS", "whole check": "PASS"}
    assert gpu_check.exit_status(targets) == 0
    # without torchao's runner its target is skipped, and skipping fails nothing
    targets = gpu_check.judge(check(torchao=None))
    assert by_name(targets, "wall").status == "SKIP"
    assert gpu_check.exit_status(targets) == 0


def test_each_broken_figure_fails_its_target():
    def judged(**kwargs):
        targets = gpu_check.judge(check(torchao={}, torchao_wall=90, **kwargs))
        assert gpu_check.exit_status(targets) == 1
        return {t.name: t.status for t in targets if t.status == "FAIL"}

    mid = (1024, 4096, 4096)
    # A/A: 1.5% off in one cell, its interval still holding 1.00 (wide): the error fails alone
    off = records(recipes=["baseline"], speedups={("baseline", mid): 1.015}, width=0.05)
    assert judged(aa=[off, records(recipes=["baseline"])]) == {"A/A error": "FAIL"}
    # intervals missing 1.00 in 2 of 12 A/A cells (83% < 95%)
    biased = records(recipes=["baseline"], speedups={("baseline", DECODE): 1.008,
                                                     ("baseline", mid): 1.008})
    assert judged(aa=[biased, records(recipes=["baseline"])]) == {"A/A coverage": "FAIL"}
    # the second process reads int8dq 5% faster at every shape: 6/9 agree
    faster = {("int8dq", shape): 1.575 for shape in gpu_check.SHAPES["cuda"]}
    assert judged(spec=[records(), records(speedups=faster)]) == {"agreement": "FAIL"}
    # the decode shape's bf16 time at 2.5x the bound in every cell
    slow = {(recipe, DECODE): 2.5 * DECODE_BOUND_MS for recipe in gpu_check.RECIPES["cuda"]}
    assert judged(spec=[records(bf16=slow)] * 2) == {"bf16 32x4096x4096 vs HBM bound": "FAIL"}
    # one decode cell of a run 8% slower than the others
    uneven = {("float8dq-row", DECODE): 1.08 * 1.5 * DECODE_BOUND_MS}
    assert judged(spec=[records(bf16=uneven), records()]) == {
        "bf16 decode spread in a run": "FAIL"}
    # ours slower than torchao's runner
    assert judged(walls=(95, 80)) == {"wall time vs torchao": "FAIL"}
    assert judged(total=500) == {"whole check": "FAIL"}


def test_a_run_that_measured_nothing_does_not_pass():
    targets = gpu_check.judge(check(aa=[[], []], spec=[[], []], walls=(3, 3)))
    assert gpu_check.exit_status(targets) == 1
    failed = {t.name for t in targets if t.status == "FAIL"}
    assert {"A/A error", "A/A coverage", "agreement", "bf16 32x4096x4096 vs HBM bound",
            "bf16 decode spread in a run"} <= failed
    # every cell skipped (a GPU without float8, say, and no baseline either): no data
    skipped = [(r, s) for r in gpu_check.RECIPES["cuda"] for s in gpu_check.SHAPES["cuda"]]
    none = records(skipped=skipped)
    targets = gpu_check.judge(check(aa=[none, none], spec=[none, none]))
    assert by_name(targets, "agreement").status == "FAIL"
    assert by_name(targets, "A/A coverage").status == "FAIL"


def test_a_missing_cell_counts_against_agreement_and_coverage():
    skipped = [("float8dq-row", shape) for shape in gpu_check.SHAPES["cuda"]]
    targets = gpu_check.judge(check(spec=[records(), records(skipped=skipped)]))
    assert by_name(targets, "agreement").figure.startswith("6/9")
    assert by_name(targets, "agreement").status == "FAIL"
    # an A/A cell without a speedup is a miss of the coverage (11/12 < 95%) and of the error
    lost = records(recipes=["baseline"], skipped=[("baseline", DECODE)])
    targets = gpu_check.judge(check(aa=[lost, records(recipes=["baseline"])]))
    assert by_name(targets, "A/A coverage").figure.startswith("11/12")
    assert by_name(targets, "A/A coverage").status == "FAIL"
    assert by_name(targets, "A/A error").status == "FAIL"


def test_cpu_judges_coverage_and_agreement_only():
    off = records("cpu", recipes=["baseline"], speedups={("baseline", (16, 256, 256)): 1.03},
                  width=0.1)
    targets = gpu_check.judge(check("cpu", aa=[off, records("cpu", recipes=["baseline"])],
                                    bandwidth=None))
    found = {t.name: t.status for t in targets}
    assert found["A/A coverage"] == found["agreement"] == "PASS"
    assert found["A/A error"] == "INFO"  # 3% off, not judged on CPU
    assert found["bf16 16x256x256 vs HBM bound"] == "SKIP"
    assert gpu_check.exit_status(targets) == 0
    slower = {(recipe, shape): SPEEDUPS[recipe] * 1.1 for recipe in gpu_check.RECIPES["cpu"]
              for shape in gpu_check.SHAPES["cpu"]}
    targets = gpu_check.judge(check("cpu", spec=[records("cpu"), records("cpu", slower)],
                                    bandwidth=None))
    assert by_name(targets, "agreement").status == "FAIL"
    assert gpu_check.exit_status(targets) == 1


def test_table_has_a_row_per_cell_with_both_runs_and_torchao_beside():
    torchao = {("int8dq", DECODE): 1.41}
    state = check(spec=[records(extra={"timing_method": "graph"}), records()], torchao=torchao,
                  torchao_wall=100)
    text = gpu_check.render(state, gpu_check.judge(state))
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["part", "recipe", "shape"]
    assert sum(line.startswith("A/A ") for line in lines) == 3
    assert sum(line.startswith("spec ") for line in lines) == 9
    row = next(line for line in lines if line.split()[:3] == ["spec", "int8dq", "32x4096x4096"])
    assert "1.500 [" in row and "1.410" in row and "yes" in row
    assert "timing_method=graph, l2=flushed | l2=flushed" in row
    assert "PASS  A/A error" in text and "targets (issue 29, cuda)" in text


def test_torchao_speedups_from_its_csv():
    rows = [
        {"quantization": "baseline", "m": "32", "k": "4096", "n": "4096",
         "torch_compile_mode": "default", "eager speedup on baseline": "1.0",
         "compile speedup on baseline": "1.0"},
        {"quantization": "int8dq", "m": "32", "k": "4096", "n": "4096",
         "torch_compile_mode": "default", "eager speedup on baseline": "0.9",
         "compile speedup on baseline": "1.4"},
        {"quantization": "int8wo", "m": "16", "k": "256", "n": "256",
         "torch_compile_mode": "false", "eager speedup on baseline": "0.5",
         "compile speedup on baseline": "0.0"},
    ]
    assert gpu_check.torchao_speedups(rows) == {
        ("baseline", DECODE): 1.0, ("int8dq", DECODE): 1.4, ("int8wo", (16, 256, 256)): 0.5}
    older = [{"quantization": "baseline", "m": "8", "k": "8", "n": "8",
              "model_inference_time_in_ms": "2.0"},
             {"quantization": "int8wo", "m": "8", "k": "8", "n": "8",
              "model_inference_time_in_ms": "4.0"}]
    assert gpu_check.torchao_speedups(older)[("int8wo", (8, 8, 8))] == pytest.approx(0.5)


def test_written_specs_are_what_the_runner_reads():
    text = gpu_check.spec_yaml("gpu_check", gpu_check.RECIPES["cuda"], gpu_check.SHAPES["cuda"],
                               "cuda", "default")
    assert "use_torch_compile: true" in text  # what recent torchao runners compile by
    cells = parse_spec(yaml.safe_load(text)).cells()
    assert len(cells) == 9
    assert {(c.quantization, (c.shape.m, c.shape.k, c.shape.n)) for c in cells} == {
        (r, s) for r in gpu_check.RECIPES["cuda"] for s in gpu_check.SHAPES["cuda"]}
    assert {c.compile_mode for c in cells} == {"default"} and {c.device for c in cells} == {"cuda"}
    eager = parse_spec(yaml.safe_load(gpu_check.spec_yaml(
        "aa", ("baseline",), gpu_check.SHAPES["cpu"], "cpu", None))).cells()
    assert [c.compile_mode for c in eager] == [None] * 3


FAKE_RUNNER = '''
import argparse, csv, os
parser = argparse.ArgumentParser()
parser.add_argument("--config")
parser.parse_args()
os.makedirs("results/gpu_check/inference", exist_ok=True)
with open("results/gpu_check/inference/results_01012026_000000.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["quantization", "m", "k", "n", "torch_compile_mode",
                     "eager speedup on baseline", "compile speedup on baseline"])
    writer.writerow(["int8wo", 16, 256, 256, "false", 0.55, 0.0])
'''


def test_torchaos_runner_runs_in_a_process_and_its_csv_is_read(tmp_path):
    package = tmp_path / "ao" / "benchmarks" / "microbenchmarks"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "benchmark_runner.py").write_text(FAKE_RUNNER)
    assert gpu_check.torchao_importable([str(tmp_path / "ao")])
    work = tmp_path / "work"
    work.mkdir()
    args = argparse.Namespace(torchao_src=str(tmp_path / "ao"))
    rows, process = gpu_check.run_torchao(tmp_path / "spec.yml", work, args, timeout=60)
    assert process.rc == 0 and process.wall_s > 0
    assert gpu_check.torchao_speedups(rows) == {("int8wo", (16, 256, 256)): 0.55}


def test_a_process_past_its_time_is_stopped_and_says_so(tmp_path):
    argv = [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"]
    process = gpu_check.run_process("slow", argv, tmp_path, [], timeout=1.0)
    assert process.rc is None and process.wall_s < 30
    assert process.last == "started"


def test_a_deadline_leaves_out_what_no_longer_fits_and_the_check_fails(tmp_path, monkeypatch):
    """With --deadline, a process is started only with LEAST_PROCESS_S left and gets what is
    left as its time limit; what was left out counts as missing, never as passed."""
    clock = [0.0]
    limits = []

    def fake_run(name, spec, work, args, timeout):
        limits.append((name, timeout))
        clock[0] += 100.0  # each run takes 100 s
        kind = "baseline" if name.startswith("aa") else None
        run = records("cpu", recipes=[kind] if kind else None)
        return run, gpu_check.Process(name, 0, 100.0, "", "")

    monkeypatch.setattr(gpu_check, "run_ours", fake_run)
    monkeypatch.setattr(gpu_check.time, "perf_counter", lambda: clock[0])
    args = argparse.Namespace(device="cpu", deadline=260.0, process_timeout=240.0, budget=None,
                              torchao_src=None, skip_torchao=False, out=None,
                              bandwidth=None)
    measured, _ = gpu_check.measure(args, None, tmp_path, gpu_check.Report())
    left = 260.0 - gpu_check.DEADLINE_RESERVE_S
    assert limits == [("aa-1", 240.0), ("spec-1", left - 100), ("aa-2", left - 200)]
    assert measured.spec_walls == [100.0] and not measured.spec_runs[1]
    targets = gpu_check.judge(measured)
    assert by_name(targets, "agreement").status == gpu_check.FAIL
    assert by_name(targets, "wall time").status == gpu_check.INFO  # not judged on CPU
    assert "1 of 2 spec runs" in by_name(targets, "wall time").figure
