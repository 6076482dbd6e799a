"""Benchmarks as programs, run once in this process the way a worker checks them before
counting: eager and TorchScript, forward and forward+backward, and the skip reasons."""

import pytest

from runner.contract.status import FAILED, SKIPPED
from runner.instructions.builtin import BUILTIN
from runner.instructions.callgrind import MeasureSettings
from runner.instructions.definitions import Benchmark, Definition, Signature, expand

pytestmark = pytest.mark.torch
X = Signature.parse("f(x) -> y")


@pytest.fixture(scope="module")
def measure():
    from runner.instructions import measure

    return measure


def run_once(measure, benchmark):
    """The namespace after one forward (and backward), or the reply saying why not."""
    import torch

    program = benchmark.program()
    problem = measure.check(benchmark, program)
    if problem is not None:
        return problem
    namespace = {"torch": torch}
    exec(program.full_setup, namespace)
    exec(program.stmt, namespace)
    return namespace


def test_every_built_in_benchmark_runs_or_says_why_not(measure):
    skipped = {}
    for benchmark in expand(BUILTIN):
        problem = measure.check(benchmark, benchmark.program()) if not benchmark.cannot_run() \
            else {"status": SKIPPED, "reason": benchmark.cannot_run()}
        if problem is not None:
            assert problem["status"] == SKIPPED, (benchmark.key, problem)
            skipped[benchmark.key] = problem["reason"]
    assert sorted(skipped) == [
        "empty [eager, forward_backward, 1 thread]",
        "empty [torchscript, forward, 1 thread]",
        "empty [torchscript, forward_backward, 1 thread]",
        "tolist [eager, forward_backward, 1 thread]",
        "tolist [torchscript, forward, 1 thread]",
        "tolist [torchscript, forward_backward, 1 thread]",
    ]
    assert skipped["tolist [eager, forward_backward, 1 thread]"] == (
        "forward+backward: the output 'y' is not a tensor")
    reason = skipped["tolist [torchscript, forward, 1 thread]"]
    assert reason.startswith("TorchScript: cannot be scripted (") and ") or traced (" in reason


def test_torchscript_scripts_statements_and_models_and_traces_what_it_cannot_script(measure):
    import torch

    by_name = {d.name: d for d in BUILTIN}
    scripted = run_once(measure, Benchmark(by_name["matmul"], "torchscript"))
    assert isinstance(scripted["_bench_fn"], torch.jit.ScriptFunction)
    # `idx` is a global of the setup, not an input: scripting fails, tracing captures it.
    traced = run_once(measure, Benchmark(by_name["index/tensor"], "torchscript"))
    assert isinstance(traced["_bench_fn"], torch.jit.ScriptFunction)
    assert traced["y"].shape == (2, 4)
    model = run_once(measure, Benchmark(by_name["mlp"], "torchscript", "forward_backward"))
    assert isinstance(model["model"], torch.jit.ScriptModule)
    assert all(p.grad is not None for p in model["model"].parameters())


def test_forward_backward_makes_float_inputs_require_grad(measure):
    namespace = run_once(measure, Benchmark(
        Definition("d", setup="x = torch.ones(3)\ni = torch.tensor([0, 2])",
                   stmt="y = x[i] * 2", signature=Signature.parse("f(x, i) -> y")),
        autograd="forward_backward"))
    assert namespace["x"].grad.tolist() == [2.0, 0.0, 2.0]
    assert not namespace["i"].requires_grad


def test_skips_and_failures_say_where(measure):
    settings = MeasureSettings()
    no_grad = measure.measure(Benchmark(
        Definition("argmax", setup="x = torch.ones(3)", stmt="y = x.argmax()", signature=X),
        autograd="forward_backward"), settings)
    assert no_grad == {"status": SKIPPED,
                       "reason": "forward+backward: the output 'y' does not require grad"}
    broken = measure.measure(Benchmark(Definition("broken", setup="x = torch.ones(3)",
                                                  stmt="y = x @ torch.ones(4)")), settings)
    assert broken["status"] == FAILED and not broken["retry"]
    assert broken["error"].startswith("forward: Traceback")
    assert "<broken forward>" in broken["error"] and "RuntimeError" in broken["error"]
    setup = measure.measure(Benchmark(Definition("setup", setup="import no_such_module",
                                                 stmt="pass")), settings)
    assert setup["error"].startswith("setup: Traceback") and "no_such_module" in setup["error"]
