"""Output formats: v3 records checked against the record contract, CSV and the table."""

import csv
import json

import pytest
from conftest import FAST

from runner.cli.outputs import write_json
from runner.contract.record import problems
from runner.engine.paired import PairedTiming
from runner.engine.run_context import RunContext
from runner.quant.records import cell_records
from runner.quant.report import CSV_COLUMNS, table, write_csv
from runner.quant.results import CellResult

pytestmark = pytest.mark.torch

PAIRED = PairedTiming((2.0,) * 12, (1.0,) * 12, (2.0,) * 6)  # six pairs at exactly 2x
TORCHAO_METRICS = ["Fwd Speedup (x)", "Bfloat16 Fwd Time (ms)", "Quantized Fwd Time (ms)"]


@pytest.fixture(scope="module")
def context() -> RunContext:
    return RunContext.collect()


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> list[CellResult]:
    from runner.quant.cells import QuantCell
    from runner.quant.execute import run_spec
    from runner.quant.shapes import Shape

    out = str(tmp_path_factory.mktemp("out"))

    def cell(quantization, sparsity=None, device="cpu"):
        return QuantCell("cpu", quantization, sparsity, Shape("custom", 32, 64, 128), "linear",
                    "bfloat16", device, None, out)

    return run_spec(
        [cell("int8wo"), cell("float8wo"), cell("baseline", "2:4"), cell("int8wo", device="cuda")],
        FAST,
    )


def test_records_keep_the_record_contract(results, context):
    records = [record for result in results for record in cell_records(result, context)]
    assert problems(records) == []
    json.dumps(records, allow_nan=False)  # what the uploader sends


def test_ok_cell_records_in_torchaos_format(results, context):
    records = cell_records(results[0], context)
    names = [r["metric"]["name"] for r in records]
    assert names[:3] == TORCHAO_METRICS
    assert "Allocated Memory (MB)" not in names  # only measured on CUDA
    assert {"Eager Speedup (x)", "Quantized TFLOP/s", "Quantized GB/s", "SQNR (dB)"} <= set(names)
    record = records[0]
    assert record["benchmark"]["name"] == "micro-benchmark api"
    assert record["benchmark"]["mode"] == "inference"
    assert record["benchmark"]["dtype"] == "int8wo"
    assert record["model"] == {"name": "int8wo-32-64-128", "type": "micro-benchmark custom layer",
                               "origins": ["torchao"]}
    extra = record["benchmark"]["extra_info"]
    assert extra["device"] == "cpu" and extra["arch"] == context.cpu_info
    assert extra["torch_compile_mode"] == "none"
    assert extra["model_type"] == "linear" and extra["shape"] == [32, 64, 128]
    assert extra["sparsity"] == "none" and extra["cpu_threads"] == 1
    assert record["runners"][0]["name"] == "cpu"
    assert record["runners"][0]["type"] == context.cpu_info
    assert record["dependencies"]["torch"]["version"] == context.torch_version
    assert record["dependencies"]["torchao"]["version"] == "0.18.0"


def test_times_keep_every_sample_and_the_speedup_every_pair(results, context):
    result = results[0]
    by_name = {r["metric"]["name"]: r["metric"] for r in cell_records(result, context)}
    quantized = by_name["Quantized Fwd Time (ms)"]
    assert quantized["benchmark_values"] == list(result.quantized_eager.samples_ms)
    assert quantized["extra_info"]["unit"] == "ms"
    assert quantized["extra_info"]["median"] == result.quantized_eager.median_ms
    assert quantized["target_value"] == 0.0
    # the eager headline in two builds: every pair's ratio of both, the hull of their intervals
    first, second = result.eager_builds
    assert by_name["Fwd Speedup (x)"]["benchmark_values"] == [*first.ratios, *second.ratios]
    speedup_extra = by_name["Fwd Speedup (x)"]["extra_info"]
    low, high = min(first.ci[0], second.ci[0]), max(first.ci[1], second.ci[1])
    assert speedup_extra.items() >= {
        "unit": "x", "compiled": False, "timing_samples": 3, "speedup": result.speedup,
        "ci_low": low, "ci_high": high, "confidence": 0.95,
        "pairs": first.pairs + second.pairs, "ci_target": 0.02,
        "unstable": result.unstable}.items()
    assert [build["speedup"] for build in speedup_extra["builds"]] == [first.speedup,
                                                                        second.speedup]
    assert set(speedup_extra) <= {"unit", "compiled", "timing_samples", "notes", "speedup",
                                  "ci_low", "ci_high", "confidence", "pairs", "ci_target",
                                  "stopped_by", "unstable", "load_avg_start", "load_avg_end",
                                  "timing_method", "calls_per_block", "cell_wall_s",
                                  "compile_s", "autotune_s", "measured_s", "builds",
                                  "builds_disagree"}
    assert by_name["Eager Speedup (x)"]["extra_info"]["speedup"] == result.speedup
    assert speedup_extra["timing_method"] == "cpu_blocks"
    # where the cell's time went: the timed calls are a part of its wall time; eager, nothing
    # compiled
    assert 0 < speedup_extra["measured_s"] <= speedup_extra["cell_wall_s"]
    assert speedup_extra["compile_s"] == speedup_extra["autotune_s"] == 0
    assert len(speedup_extra["load_avg_start"]) == 3  # the 1, 5 and 15 minute load
    assert by_name["SQNR (dB)"]["benchmark_values"] == [result.sqnr_db]


def test_skipped_cells_stay_visible_as_status_records(results, context):
    sparse, no_cuda = results[2], results[3]
    assert sparse.status == no_cuda.status == "skipped"
    [record] = cell_records(sparse, context)
    assert record["model"]["name"] == "baseline+2:4-32-64-128"
    assert record["benchmark"]["dtype"] == "baseline+2:4"
    assert record["benchmark"]["extra_info"]["sparsity"] == "2:4"
    assert record["metric"]["name"] == "status"
    assert "benchmark_values" not in record["metric"]
    assert record["metric"]["extra_info"] == {"benchmark_values": ["skipped"],
                                              "reason": "needs device cuda, the cell runs on cpu",
                                              "timing_samples": 3}
    [record] = cell_records(no_cuda, context)
    assert record["metric"]["extra_info"]["reason"] == "CUDA is not available on this machine"
    assert record["runners"][0]["name"] == "cuda"


def test_failed_cells_carry_the_error(results, context):
    failed = CellResult(results[0].cell, "failed", "RuntimeError: boom")
    [record] = cell_records(failed, context)
    assert record["metric"]["extra_info"] == {"benchmark_values": ["failed"],
                                              "error": "RuntimeError: boom"}
    assert problems([record]) == []


def test_cuda_memory_is_reported_when_measured(results, context):
    result = CellResult(results[0].cell, "ok", eager=PAIRED, peak_memory_mb=12.5)
    by_name = {r["metric"]["name"]: r["metric"] for r in cell_records(result, context)}
    assert by_name["Allocated Memory (MB)"]["benchmark_values"] == [12.5]
    assert by_name["Fwd Speedup (x)"]["benchmark_values"] == [2.0] * 6


def test_csv_has_torchaos_columns_then_ours(results, tmp_path):
    path = tmp_path / "results.csv"
    write_csv(path, results)
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert CSV_COLUMNS[:3] == ("name", "quantization", "sparsity")
    assert rows[0]["status"] == "ok" and float(rows[0]["eager speedup on baseline"]) > 0
    assert rows[0]["high_precision_dtype"] == "torch.bfloat16"
    assert rows[2]["status"] == "skipped" and rows[2]["sparsity"] == "2:4"
    assert rows[2]["reason"] == "needs device cuda, the cell runs on cpu"


def test_json_output_is_a_valid_list(results, context, tmp_path):
    path = tmp_path / "out" / "results.json"
    records = cell_records(results[0], context)
    write_json(path, records)
    assert json.loads(path.read_text()) == records
    assert not list(path.parent.glob(".*partial"))


def test_table_shows_every_cell_and_why_it_did_not_run(results):
    text = table(results)
    lines = text.splitlines()
    assert lines[0].split() == ["recipe", "model", "shape", "compile", "status", "bf16", "ms",
                                "quant", "ms", "speedup", "95%", "CI", "pairs", "SQNR", "dB",
                                "note"]
    assert len(lines) == 2 + len(results)
    assert "baseline+2:4" in lines[4] and "needs device cuda" in lines[4]
    assert "CUDA is not available on this machine" in lines[5]
    assert "x  " in lines[2]  # the speedup column


def test_cuda_records_describe_the_gpu(results):
    gpu = RunContext(
        cpu_info="Intel Xeon", cpu_count=32, mem_gb=512.0, avail_mem_gb=400.0,
        gpu_info="NVIDIA H100 80GB HBM3", gpu_count=8, gpu_mem_gb=79.1, avail_gpu_mem_gb=78.0,
        gpu_capability="9.0", torch_version="2.13.0", torch_sha="abc", cuda_version="12.8",
        torchao_version="0.18.0",
    )
    cell = results[3].cell  # a CUDA cell
    result = CellResult(cell, "ok", eager=PAIRED, peak_memory_mb=3.0,
                        settings=results[0].settings)
    record = cell_records(result, gpu)[0]
    assert record["benchmark"]["extra_info"]["arch"] == "NVIDIA H100 80GB HBM3"
    assert record["benchmark"]["extra_info"]["l2_flush"] is True
    runner = record["runners"][0]
    assert (runner["name"], runner["type"], runner["gpu_count"]) == ("cuda", gpu.gpu_info, 8)
    assert runner["gpu_mem_info"] == "79.1 GB" and runner["extra_info"]["gpu_capability"] == "9.0"
    assert record["dependencies"]["torch"]["extra_info"] == {"cuda": "12.8"}
    assert problems(cell_records(result, gpu)) == []
