"""Real callgrind counts (about a minute of one core each, so only two tiny statements):
counts of one statement agree across repeats and across worker processes, and a failing
definition next to them is recorded as failed while they finish."""

import os
import shutil
import statistics

import pytest

from runner.contract.record import problems
from runner.contract.status import FAILED, OK
from runner.engine.run_context import RunContext
from runner.instructions.callgrind import MeasureSettings, Pool
from runner.instructions.definitions import Benchmark, Definition, Signature
from runner.instructions.records import measurement_records

pytestmark = pytest.mark.torch
TOLERANCE = 0.005  # counts of one statement differ by a few tenths of a percent at most


@pytest.fixture(scope="module")
def valgrind():
    if shutil.which("valgrind") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("valgrind is missing: CI must count instructions")
        pytest.skip("valgrind is missing (apt-get install valgrind)")


def test_counts_repeat_and_a_failure_does_not_stop_the_others(valgrind):
    add = dict(setup="x = torch.ones((4, 4))", stmt="y = x + x",
               signature=Signature.parse("f(x) -> y"))
    benchmarks = [Benchmark(Definition("add", **add)), Benchmark(Definition("add_again", **add)),
                  Benchmark(Definition("broken", stmt="torch.ones(2) @ torch.ones(3)"))]
    results = Pool(2).run(benchmarks, MeasureSettings(number=1000, repeats=2, retries=1))

    assert [r.status for r in results] == [OK, OK, FAILED], [r.error for r in results]
    assert "size mismatch" in results[2].error or "RuntimeError" in results[2].error
    first, second = (statistics.median(r.per_call) for r in results[:2])
    assert 2_000 < first < 100_000  # a tensor add is thousands of instructions, not millions
    assert abs(second / first - 1) < TOLERANCE, (results[0].per_call, results[1].per_call)
    assert all(r.spread < TOLERANCE for r in results[:2]), [r.per_call for r in results[:2]]
    assert all(len(r.counts) == 2 and r.number == 1000 and r.wall_us for r in results[:2])
    records = [record for r in results for record in measurement_records(r, RunContext.collect())]
    assert problems(records) == []
    print(f"\nadd: {results[0].per_call} and {results[1].per_call} instructions per call, "
          f"{results[0].seconds:.0f} s and {results[1].seconds:.0f} s")
