"""Measurements as OSS v3 records (checked against the record contract), the CLI's table,
and the family's run of one cell."""

import pytest
from conftest import series_names

from runner.cli.instructions import table
from runner.contract.directions import LOWER, direction
from runner.contract.names import INSTRUCTIONS_BENCHMARK
from runner.contract.record import problems
from runner.contract.status import FAILED, OK, SKIPPED
from runner.engine.run_context import RunContext
from runner.instructions import family
from runner.instructions.callgrind import Measurement, MeasureSettings
from runner.instructions.definitions import Benchmark, Definition, Signature
from runner.instructions.records import measurement_records

pytestmark = pytest.mark.torch
LINEAR = Definition("linear", setup="x = torch.ones((4, 16))", model="torch.nn.Linear(16, 8)",
                    signature=Signature.parse("f(x) -> y"))


@pytest.fixture(scope="module")
def context():
    return RunContext.collect()


def counted(benchmark):
    return Measurement(benchmark, OK, counts=[900_000, 902_000, 901_000], number=100,
                       wall_us=[3.5, 3.25], attempts=1, seconds=61.0)


def test_a_count_is_two_metrics_of_one_series_per_expansion(context):
    eager = measurement_records(counted(Benchmark(LINEAR)), context)
    scripted = measurement_records(counted(Benchmark(LINEAR, "torchscript", "forward_backward",
                                                     threads=4)), context)
    assert problems(eager + scripted) == []
    count, wall = eager
    assert count["benchmark"] == {"name": "instruction counts", "mode": "inference",
                                  "extra_info": {"runtime": "eager", "autograd": "forward",
                                                 "threads": 1}}
    assert count["model"] == {"name": "linear", "type": "model", "backend": "eager",
                              "origins": ["pytorch"]}
    assert count["metric"]["name"] == "instruction_count"
    assert count["metric"]["benchmark_values"] == [9000.0, 9020.0, 9010.0]  # per call
    assert count["metric"]["extra_info"]["totals"] == [900_000, 902_000, 901_000]
    assert count["metric"]["extra_info"]["spread"] == pytest.approx(2000 / 901_000)
    assert wall["metric"]["name"] == "wall_time"
    assert wall["metric"]["benchmark_values"] == [3.5, 3.25]
    assert count["runners"][0]["name"] == "cpu" and "torch" in count["dependencies"]
    assert scripted[0]["benchmark"]["mode"] == "training"
    assert scripted[0]["benchmark"]["extra_info"] == {
        "runtime": "torchscript", "autograd": "forward_backward", "threads": 4}
    assert len(series_names(eager + scripted)) == 4  # every expansion its own series
    for record in count, wall:
        metric = record["metric"]
        assert direction(metric["name"], INSTRUCTIONS_BENCHMARK,
                         metric["extra_info"]["unit"]).better == LOWER


def test_skipped_and_failed_stay_visible_as_status_records(context):
    skipped = Measurement(Benchmark(LINEAR, "torchscript"), SKIPPED, error="TorchScript: no")
    failed = Measurement(Benchmark(LINEAR), FAILED, error="attempt 1: timed out after 3 s")
    [skip], [fail] = (measurement_records(m, context) for m in (skipped, failed))
    assert problems([skip, fail]) == []
    assert "benchmark_values" not in skip["metric"]  # a string result only
    assert skip["metric"]["extra_info"] == {"benchmark_values": ["skipped"],
                                            "reason": "TorchScript: no"}
    assert fail["metric"]["extra_info"] == {"benchmark_values": ["failed"],
                                            "error": "attempt 1: timed out after 3 s"}
    lines = table([counted(Benchmark(LINEAR)), skipped]).splitlines()
    assert lines[0].split() == ["benchmark", "status", "instr/call", "spread", "wall", "us",
                                "seconds"]
    assert lines[1].split()[-4:] == ["9,010", "0.22%", "3.38", "61.0"]
    assert lines[2].split()[-1] == "skipped"


def test_the_family_runs_a_cell_in_a_worker_and_records_its_failure(context, tmp_path):
    broken = Benchmark(Definition("broken", stmt="y = 1 / 0"))
    cell = {"benchmark": broken.to_dict(), "settings": vars(MeasureSettings())}
    outcome = family.run(cell, {"retries": 0}, {}, context, tmp_path)
    assert outcome.status == FAILED and "ZeroDivisionError" in outcome.error
    assert outcome.measured_s is None and outcome.detail.attempts == 1
    [record] = outcome.records
    assert record["metric"]["extra_info"]["benchmark_values"] == ["failed"]
