"""Running real torchao recipes on CPU: metrics, model types, skips, isolation, baseline reuse."""

import json
import statistics
from pathlib import Path

import pytest
from conftest import FAST

from runner.engine.timing_data import TimingSettings
from runner.quant import models
from runner.quant.cells import QuantCell
from runner.quant.execute import run_cell, run_spec
from runner.quant.recipes import CustomRecipe, Requirements
from runner.quant.records import cell_records
from runner.quant.results import CellResult
from runner.quant.shapes import Shape

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def cpu_results(tmp_path_factory) -> dict[str, CellResult]:
    """The recipes that run on CPU with torch 2.13 / torchao 0.18, on one small linear."""
    out = tmp_path_factory.mktemp("out")
    cells = [
        QuantCell("cpu", q, None, Shape("custom", 32, 64, 128), "linear", "bfloat16", "cpu", None,
             str(out))
        for q in ("baseline", "int8wo", "int8dq", "float8wo")
    ]
    return {r.cell.quantization: r for r in run_spec(cells, FAST)}


@pytest.mark.parametrize(("recipe", "min_sqnr"), [("int8wo", 35), ("int8dq", 30),
                                                  ("float8wo", 25)])
def test_cpu_recipes_run_and_measure(cpu_results, recipe, min_sqnr):
    result = cpu_results[recipe]
    assert result.status == "ok", result.reason
    assert len(result.baseline_eager.samples_ms) == len(result.quantized_eager.samples_ms)
    assert len(result.quantized_eager.samples_ms) == 4 * result.eager.pairs
    # two eager builds (models and input made again), combined: every pair's ratio, and an
    # interval holding both builds'
    assert len(result.eager_builds) == 2 and result.eager is result.eager_builds[0]
    ratios = [ratio for build in result.eager_builds for ratio in build.ratios]
    assert result.speedup == pytest.approx(statistics.median(ratios))
    low, high = result.headline.ci
    assert low <= result.speedup <= high
    assert all(low <= build.ci[0] and build.ci[1] <= high for build in result.eager_builds)
    assert result.compiled_speedup is None and result.quantized_compiled is None
    assert result.sqnr_db > min_sqnr
    assert result.flops == 2 * 32 * 64 * 128
    assert 0 < result.quantized_bytes < 2 * (32 * 64 + 64 * 128 + 32 * 128)  # below bf16 size
    assert result.tflops > 0 and result.gbps > 0
    assert result.peak_memory_mb is None  # CUDA only
    assert 0 < result.measured_s < result.wall_s


def test_baseline_recipe_matches_itself(cpu_results):
    baseline = cpu_results["baseline"]
    assert baseline.status == "ok"
    assert baseline.sqnr_db is None  # identical outputs
    assert baseline.quantized_bytes == 2 * (32 * 64 + 64 * 128 + 32 * 128)


def test_the_baseline_is_timed_in_every_cell_interleaved_with_its_quantized_model(
        make_cell, monkeypatch):
    from runner.quant import execute

    calls = []
    real_pair = execute.measure_pair

    def measure_pair(baseline, candidate, device, settings):
        calls.append(device)
        return real_pair(baseline, candidate, device, settings)

    monkeypatch.setattr(execute, "measure_pair", measure_pair)
    results = run_spec([make_cell(q) for q in ("baseline", "int8wo", "float8wo")], FAST)
    assert len(calls) == 6  # one paired measurement per eager build, two a cell, baseline too
    for result in results:
        for build in result.eager_builds:
            assert build.pairs >= 6
            assert len(build.baseline.samples_ms) == 4 * build.pairs
        # the median of both builds' pairs' ratios
        assert result.speedup == statistics.median(
            [ratio for build in result.eager_builds for ratio in build.ratios])


def test_a_speedup_whose_interval_stays_wide_is_marked_unstable(make_cell, monkeypatch,
                                                                tmp_path):
    from runner.engine.paired import PairedTiming
    from runner.quant import execute
    from runner.quant.family import run as run_family

    wide = PairedTiming((1.0,) * 16, (1.0,) * 16, (0.7, 1.3, 0.8, 1.2, 0.9, 1.1, 1.0, 1.0),
                        stopped="budget")
    monkeypatch.setattr(execute, "measure_pair", lambda *args: wide)
    result = run_cell(make_cell("int8wo"), FAST)
    assert result.status == "ok" and result.unstable
    assert result.notes[0].startswith("unstable eager (build 1) speedup: 95% CI ±")
    headline = _records(result)[0]["metric"]
    assert headline["name"] == "Fwd Speedup (x)"
    assert headline["benchmark_values"] == list(wide.ratios) * 2  # both builds
    assert headline["extra_info"]["unstable"] is True
    assert headline["extra_info"]["stopped_by"] == "budget"
    assert (headline["extra_info"]["ci_low"], headline["extra_info"]["ci_high"]) == wide.ci
    assert "unstable eager (build 2) speedup" in headline["extra_info"]["notes"]

    cell = {**make_cell("int8wo").to_dict(), "output_dir": "inference"}  # under tmp_path
    outcome = run_family(cell, {}, {}, _context(), tmp_path)
    assert outcome.status == "ok" and outcome.unstable


@pytest.mark.parametrize("model_type", models.MODEL_TYPES)
def test_every_model_type_runs_quantized(make_cell, model_type):
    result = run_cell(make_cell("int8wo", model_type=model_type, shape=Shape("s", 4, 64, 32)),
                      settings=FAST)
    assert result.status == "ok", result.reason
    assert result.sqnr_db > 30
    assert result.flops == models.flops(model_type, 4, 64, 32)


def test_transformer_block_flops_count_every_matmul():
    tokens, k = 4 * 16, 64
    projections = 2 * tokens * k * (3 * k + k + 8 * k)
    assert models.flops("transformer_block", 4, k, 999) == projections + 4 * 4 * 16 * 16 * k


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"device": "cuda"}, "CUDA is not available on this machine"),
        ({"device": "mps"}, "the runner measures on cuda and cpu, not mps"),
        ({"quantization": "float8dq-row"}, "needs device cuda, the cell runs on cpu"),
        ({"quantization": "int4wo-128-hqq"}, "needs device cuda, the cell runs on cpu"),
        ({"quantization": "baseline", "sparsity": "2:4"}, "needs device cuda"),
        ({"quantization": "int8dq", "sparsity": "2:4"}, "no int8 dynamic 2:4 sparse layout"),
        ({"quantization": "int4-cpu", "custom_recipe": CustomRecipe(
            "int4-cpu", "torchao.quantization.Int4WeightOnlyConfig", {"group_size": 128})},
         "int4-cpu left all 1 linear weights unchanged"),  # K = 64 < group size
        ({"quantization": "needs-pkg", "custom_recipe": CustomRecipe(
            "needs-pkg", "torchao.quantization.Int8WeightOnlyConfig",
            requires=Requirements(packages=("surely_not_installed",)))},
         "needs package surely_not_installed"),
    ],
)
def test_cells_this_machine_cannot_run_are_skipped_with_the_reason(make_cell, overrides, reason):
    result = run_cell(make_cell(**overrides), settings=FAST)
    assert result.status == "skipped"
    assert reason in result.reason
    assert result.speedup is None and result.quantized_eager is None


def test_a_failing_cell_does_not_stop_the_run(make_cell):
    broken = CustomRecipe("broken", "torchao.quantization.Int8WeightOnlyConfig", {"nope": 1})
    results = run_spec(
        [make_cell("broken", custom_recipe=broken), make_cell("int8wo")], FAST
    )
    assert [r.status for r in results] == ["failed", "ok"]
    assert results[0].reason.startswith("TypeError: ")
    assert "unexpected keyword argument 'nope'" in results[0].reason


def test_out_of_memory_fails_only_its_cell(make_cell, monkeypatch):
    import torch

    real_build = models.build

    def build(model_type, m, k, n, dtype, device):
        if m == 4096:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
        return real_build(model_type, m, k, n, dtype, device)

    monkeypatch.setattr(models, "build", build)
    seen = []
    results = run_spec(
        [make_cell(shape=Shape("big", 4096, 64, 128)), make_cell()], FAST, on_cell=seen.append
    )
    assert [r.status for r in results] == ["failed", "ok"]
    assert results[0].reason == "out of memory: CUDA out of memory. Tried to allocate 8.00 GiB"
    assert seen == results


def test_compiled_cell_measures_eager_and_compiled(make_cell):
    result = run_cell(make_cell("int8wo", compile_mode="default"), settings=FAST)
    assert result.status == "ok", result.reason
    assert result.baseline_compiled and result.quantized_compiled
    assert result.speedup == result.compiled_speedup
    assert result.baseline == result.baseline_compiled and result.paired is result.compiled
    assert result.eager_speedup > 0
    names = [r["metric"]["name"] for r in _records(result)]
    assert names[:3] == ["Fwd Speedup (x)", "Bfloat16 Fwd Time (ms)", "Quantized Fwd Time (ms)"]
    assert {"Compiled Speedup (x)", "Eager Speedup (x)", "Bfloat16 Eager Fwd Time (ms)",
            "Quantized Eager Fwd Time (ms)"} <= set(names)


def test_profiler_trace_is_written_and_linked(make_cell):
    result = run_cell(make_cell("int8wo", enable_profiler=True, enable_memory_profiler=True),
                      settings=FAST)
    assert result.status == "ok", result.reason
    trace = result.artifacts["profiler_json"]
    assert trace.endswith("test_linear_int8wo_32-64-128_bfloat16_cpu_eager.json")
    assert "traceEvents" in json.loads(Path(trace).read_text())
    assert "memory snapshot needs CUDA; none written" in result.notes
    record = _records(result)[0]
    assert record["metric"]["extra_info"]["profiler_json_path"] == trace
    assert "memory snapshot needs CUDA" in record["metric"]["extra_info"]["notes"]
    assert "profiler_json_path" not in record["benchmark"]["extra_info"]  # not identifying


def test_results_round_trip_through_plain_json(cpu_results, make_cell):
    assert TimingSettings.from_dict(json.loads(json.dumps(FAST.to_dict()))) == FAST
    skipped = run_cell(make_cell(device="cuda"), settings=FAST)
    for result in [cpu_results["int8wo"], skipped]:
        data = json.loads(json.dumps(result.to_dict()))
        assert CellResult.from_dict(data) == result


def _records(result):
    from runner.engine.run_context import RunContext

    return cell_records(result, RunContext.collect())


def _context():
    from runner.engine.run_context import RunContext

    return RunContext.collect()
