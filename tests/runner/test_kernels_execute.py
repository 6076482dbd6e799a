"""Kernel cells on CPU: every kernel both ways on eager, accuracy against eager (gradients
included) with its tolerance, skipped and failing backends, and the records they make."""

import statistics

import pytest
from conftest import FAST, series_names

from runner.contract import directions
from runner.contract.directions import HIGHER, LOWER
from runner.contract.names import KERNELS_BENCHMARK
from runner.contract.record import problems
from runner.kernels import backends, family
from runner.kernels.backends import Backend
from runner.kernels.definitions import KERNELS, bytes_moved
from runner.kernels.spec import KernelCell

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

from runner.engine.run_context import RunContext  # noqa: E402
from runner.kernels.execute import run_cell  # noqa: E402
from runner.kernels.records import cell_records  # noqa: E402


@pytest.fixture(scope="module")
def context():
    return RunContext.collect()


def cell(kernel="softmax", direction="forward", backend="eager", **overrides) -> KernelCell:
    values = {"m": 8, "n": 16, "dtype": "float32", "device": "cpu", "compile_mode": None}
    return KernelCell(kernel, direction, backend=backend, **{**values, **overrides})


def add_backend(monkeypatch, name, build, **options):
    monkeypatch.setitem(backends.BACKENDS, name, Backend(name, build, **options))


def skewed(kernel, mode=None):
    """Eager's softmax, 0.1% too large: within a loose tolerance, outside a tight one."""
    return lambda x: torch.softmax(x, dim=-1) * 1.001


class SoftmaxWrongGrad(torch.autograd.Function):
    """A right forward with a backward 5% too large."""

    @staticmethod
    def forward(ctx, x):
        y = torch.softmax(x, dim=-1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return y * (grad - (grad * y).sum(-1, keepdim=True)) * 1.05


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_every_kernel_runs_both_ways_on_eager(kernel, context):
    for direction in ("forward", "backward"):
        result = run_cell(cell(kernel, direction), FAST)
        assert result.status == "ok", result.traceback
        assert len(result.timing.samples_ms) == FAST.samples
        assert result.bytes == bytes_moved(kernel, direction, 8, 16, "float32")
        assert result.gbps == pytest.approx(result.bytes / result.timing.median_ms / 1e6)
        assert result.accuracy is None and result.speedup is None  # eager is the reference
        records = cell_records(result, context)
        assert [r["metric"]["name"] for r in records] == ["latency", "memory_bandwidth"]


def test_compiled_matches_eager_gradients_and_reports_speedup(context):
    """The one torch.compile cell: a backward, timed with retain_graph on a compiled graph."""
    compiled = run_cell(cell(direction="backward", backend="compiled", compile_mode="default"),
                        FAST)
    assert compiled.status == "ok", compiled.traceback
    assert compiled.accuracy == "pass"
    # eager timed again, interleaved with the compiled graph: the speedup is the pairs' median
    assert compiled.eager == compiled.paired.baseline
    assert compiled.timing == compiled.paired.candidate
    assert compiled.speedup == statistics.median(compiled.paired.ratios)
    metrics = {r["metric"]["name"]: r["metric"] for r in cell_records(compiled, context)}
    assert list(metrics) == ["accuracy", "latency", "memory_bandwidth", "speedup"]
    assert metrics["accuracy"]["extra_info"]["benchmark_values"] == ["pass"]


def test_accuracy_tolerance_decides_and_a_mismatch_fails_untimed(monkeypatch, context):
    add_backend(monkeypatch, "skewed", skewed)
    loose = run_cell(cell(backend="skewed", atol=1e-2, rtol=1e-2), FAST)
    assert (loose.status, loose.accuracy) == ("ok", "pass")
    assert loose.eager is not None  # measured in the cell: no eager cell ran before

    tight = run_cell(cell(backend="skewed", atol=1e-6, rtol=1e-6), FAST)
    assert (tight.status, tight.accuracy, tight.timing) == ("failed", "fail_accuracy", None)
    assert tight.reason.startswith("differs from eager beyond atol=1e-06, rtol=1e-06: y: ")
    records = cell_records(tight, context)
    assert [r["metric"]["name"] for r in records] == ["accuracy", "status"]
    accuracy, status = (r["metric"]["extra_info"] for r in records)
    assert accuracy["benchmark_values"] == ["fail_accuracy"]
    assert (accuracy["atol"], accuracy["mismatch"]) == (1e-6, tight.reason)
    assert status == {"benchmark_values": ["failed"], "error": tight.reason, "timing_samples": 3}


def test_gradients_are_compared_too(monkeypatch):
    add_backend(monkeypatch, "wrong_grad", lambda kernel, mode=None: SoftmaxWrongGrad.apply)
    forward = run_cell(cell(backend="wrong_grad"), FAST)
    backward = run_cell(cell(direction="backward", backend="wrong_grad"), FAST)
    assert (forward.status, forward.accuracy) == ("ok", "pass")
    assert (backward.status, backward.accuracy) == ("failed", "fail_accuracy")
    assert backward.reason.startswith(
        "differs from eager beyond the default tolerance for float32 (rtol=0.0001, atol=rtol x "
        "the tensor's largest magnitude): grad x: Mismatched elements")


def test_a_backend_without_backward_is_skipped_there(monkeypatch):
    add_backend(monkeypatch, "forward_only",
                lambda kernel, mode=None: lambda x: torch.softmax(x.detach(), dim=-1))
    result = run_cell(cell(direction="backward", backend="forward_only"), FAST)
    assert (result.status, result.reason) == ("skipped",
                                              "forward_only has no backward for softmax")


def test_liger_and_quack_are_skipped_with_the_reason(monkeypatch, context):
    for name, package in (("liger", "liger_kernel"), ("quack", "quack")):
        result = run_cell(cell(backend=name), FAST)
        assert result.status == "skipped"
        assert f"{package} is not installed" in result.reason
        assert f"{name} needs CUDA; the device is cpu" in result.reason
        [record] = cell_records(result, context)
        assert record["metric"]["extra_info"]["benchmark_values"] == ["skipped"]
        assert record["metric"]["extra_info"]["reason"] == result.reason
    # installed, but CUDA only
    add_backend(monkeypatch, "gpu_only", skewed, needs_cuda=True)
    result = run_cell(cell(backend="gpu_only"), FAST)
    assert result.reason == "gpu_only needs CUDA; the device is cpu"
    if not torch.cuda.is_available():
        result = run_cell(cell(device="cuda"), FAST)
        assert (result.status, result.reason) == ("skipped",
                                                  "CUDA is not available on this machine")


def test_a_failing_backend_fails_there_and_the_other_cells_finish(monkeypatch, context,
                                                                   tmp_path):
    def flaky(kernel, mode=None):
        def softmax(x):
            if x.shape[1] == 32:
                raise RuntimeError("no kernel for N=32")
            return torch.softmax(x, dim=-1)
        return softmax

    add_backend(monkeypatch, "flaky", flaky)
    planned = family.plan({"kernels": ["softmax"], "directions": ["forward"],
                           "backends": ["flaky", "eager"], "shapes": ["8x16", "8x32", "8x64"],
                           "dtype": "float32", "device": "cpu",
                           "timing": {"samples": 3, "warmup_s": 0}}, "spec")
    state = {}
    outcomes = {p.key.split("/", 2)[2]: family.run(p.cell, {"min_sample_s": 0.0005}, state,
                                                   context, tmp_path)
                for p in planned}
    assert {key: o.status for key, o in outcomes.items()} == {
        "8x16/float32/cpu/eager": "ok", "8x16/float32/cpu/flaky": "ok",
        "8x32/float32/cpu/eager": "ok", "8x32/float32/cpu/flaky": "failed",
        "8x64/float32/cpu/eager": "ok", "8x64/float32/cpu/flaky": "ok"}
    failed = outcomes["8x32/float32/cpu/flaky"]
    assert failed.error.startswith("Traceback") and "RuntimeError: no kernel for N=32" in \
        failed.error
    [status] = failed.records
    assert status["metric"]["extra_info"]["benchmark_values"] == ["failed"]
    assert "benchmark_values" not in status["metric"]  # a string result only
    assert outcomes["8x64/float32/cpu/flaky"].detail.settings.min_sample_s == 0.0005


def test_records_form_one_series_per_kernel_backend_shape_and_metric(context):
    records = []
    for n, backend, mode in ((32, "eager", None), (16, "eager", None),
                             (16, "compiled", "default")):
        result = run_cell(cell("layer_norm", backend=backend, compile_mode=mode, n=n), FAST)
        records += cell_records(result, context)
    assert problems(records) == []
    assert len(series_names(records)) == len(records) == 2 + 2 + 4
    record = records[-1]
    assert record["benchmark"] == {
        "name": "fused kernels", "mode": "forward", "dtype": "float32",
        "extra_info": {"device": "cpu", "arch": context.cpu_info,
                       "torch_compile_mode": "default", "shape": [8, 16],
                       "shape_name": "8x16", "cpu_threads": 1}}
    assert record["model"] == {"name": "layer_norm", "type": "fused kernel",
                               "backend": "compiled", "origins": ["kernels"]}
    units = {r["metric"]["name"]: r["metric"]["extra_info"].get("unit") for r in records}
    assert units == {"latency": "ms", "memory_bandwidth": "GB/s", "speedup": "x",
                     "accuracy": None}
    assert [directions.direction(name, KERNELS_BENCHMARK, unit).better
            for name, unit in units.items() if unit] == [LOWER, HIGHER, HIGHER]
    latency = next(r["metric"] for r in records if r["metric"]["name"] == "latency")
    assert len(latency["benchmark_values"]) == FAST.samples
