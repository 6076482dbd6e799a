"""What keeps a cell's numbers honest on a GPU, checked on CPU: compiled builds combined, a
cell wall budget that a slow call keeps to, suspect cells with their top kernels, and the
GPU's clocks at a cell's start and end in its records."""

import dataclasses
import json
import math
from types import SimpleNamespace

import pytest
from conftest import FAST

from runner.engine.paired import PairedTiming
from runner.engine.run_context import RunContext
from runner.engine.timing_data import TimingSettings
from runner.quant import execute, models
from runner.quant.execute import run_cell
from runner.quant.recipes import Recipe
from runner.quant.records import cell_records
from runner.quant.results import CellResult

pytestmark = pytest.mark.torch

STEADY = (0.99, 1.0, 1.0, 1.01, 1.0, 1.0, 0.995, 1.005)


def timing(by: float) -> PairedTiming:
    return PairedTiming((by,) * 32, (1.0,) * 32, tuple(r * by for r in STEADY))


def records(result: CellResult) -> list[dict]:
    return cell_records(result, RunContext.collect())


def headline(result: CellResult) -> dict:
    [record] = [r for r in records(result) if r["metric"]["name"] == "Fwd Speedup (x)"]
    return record["metric"]["extra_info"]


class FakeClock:
    """The cell's clock: only the fake models' calls move it."""

    now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def slow_quantized(monkeypatch):
    """Cells whose quantized model takes a second a call of the cell's (fake) clock, and
    bf16 a millisecond; returns the count of the quantized model's calls."""
    import torch

    clock, calls = FakeClock(), {"slow": 0}

    class Costly(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model, self.cost = model, 0.001

        def forward(self, data):
            clock.now += self.cost
            calls["slow"] += self.cost == 1.0
            return self.model(data)

    real_build, real_apply = models.build, Recipe.apply

    def build(*args):
        model, data = real_build(*args)
        return Costly(model), data

    def apply(self, model, config):
        real_apply(self, model, config)
        model.cost = 1.0

    monkeypatch.setattr(execute, "clock", clock)
    monkeypatch.setattr(models, "build", build)
    monkeypatch.setattr(Recipe, "apply", apply)
    return calls


def test_a_second_long_call_keeps_to_a_three_second_cell_budget_and_says_so(
        make_cell, slow_quantized):
    settings = dataclasses.replace(FAST, cell_budget_s=3.0)
    result = run_cell(make_cell("int8wo"), settings)
    assert result.status == "ok", result.reason
    # the SQNR's call; in each build one probe and one pair (4 calls); one profiled call of
    # a suspect cell: the timer's warm-up and calibration would have looped on a fake clock
    assert slow_quantized["slow"] <= 12
    assert result.eager.pairs == 1 and result.eager.stopped == "cell_budget"
    assert "eager (build 1) speedup: measured 1 of 6 pairs: cell budget spent" in result.notes
    assert any(note.startswith("eager (build 1): one call per block, no warm-up")
               for note in result.notes)
    # the second build, in a budget of its own, was cut before an interval too: left out
    assert len(result.eager_builds) == 1 and result.unstable
    assert "eager speedup from 1 of 2 builds: its interval holds no spread between builds, " \
           "the cell is unstable" in result.notes
    # each build over its budget by at most its probe and a pair; the profile
    assert result.wall_s <= 2 * (3.0 + 5 * 1.0) + 1.0
    assert result.suspect.startswith("speedup 0.0010x: the quantized model 1,000x slower")
    assert headline(result)["stopped_by"] == "cell_budget"


def test_an_ordinary_cpu_cell_is_timed_as_before(make_cell, monkeypatch):
    """No GPU read, no compiled build, no suspicion: the records carry none of it. Its eager
    speedup is measured in two builds, and its speedup records list both."""

    def no_gpu():
        raise AssertionError("a CPU cell reads no GPU")

    monkeypatch.setattr(execute, "gpu_clocks", no_gpu)
    result = run_cell(make_cell("int8wo"), FAST)
    assert result.status == "ok", result.reason
    assert result.builds == [] and result.suspect is None and result.gpu_state == {}
    assert len(result.eager_builds) == 2
    assert all(build.stopped != "cell_budget" for build in result.eager_builds)
    for record in records(result):
        extra = record["metric"]["extra_info"]
        assert not {"suspect", "top_kernels", "gpu_state", "clocks_moved"} & extra.keys()
        assert len(extra["builds"]) == 2 if "Speedup" in record["metric"]["name"] \
            else "builds" not in extra


def test_a_quantized_model_1000x_slower_than_bf16_is_suspect_with_its_top_kernels(
        make_cell, monkeypatch):
    slow = PairedTiming((1.0,) * 32, (1000.0,) * 32, (0.001,) * 8)
    monkeypatch.setattr(execute, "measure_pair", lambda *args: slow)
    result = run_cell(make_cell("int8wo"), FAST)
    assert result.status == "ok" and result.speedup == 0.001  # the numbers are kept
    assert result.suspect == "speedup 0.0010x: the quantized model 1,000x slower than bf16"
    assert 0 < len(result.top_kernels) <= 5
    top = result.top_kernels[0]
    assert top["name"].startswith("aten::") and top["total_ms"] > 0 and top["calls"] >= 3
    assert any(note.startswith("suspect: speedup 0.0010x") and top["name"] in note
               for note in result.notes)
    info = headline(result)
    assert info["suspect"] == result.suspect and info["top_kernels"] == result.top_kernels
    others = [r for r in records(result) if r["metric"]["name"] != "Fwd Speedup (x)"]
    assert others and all("top_kernels" not in r["metric"]["extra_info"] for r in others)
    from runner.cli.outputs import status_counts
    from runner.quant.report import table

    assert status_counts([result]) == {"suspect": 1}
    assert " suspect " in table([result])


def test_the_baseline_recipe_is_never_suspect(make_cell, monkeypatch):
    slow = PairedTiming((1.0,) * 32, (1000.0,) * 32, (0.001,) * 8)
    monkeypatch.setattr(execute, "measure_pair", lambda *args: slow)
    assert run_cell(make_cell("baseline"), FAST).suspect is None


def test_outputs_that_make_no_sense_are_suspect():
    import torch

    reference = torch.ones(4)
    assert execute._accuracy_suspicions(reference, torch.tensor([1.0, float("nan"), 1, 1]),
                                        None) == ["quantized output holds NaN or inf"]
    assert execute._accuracy_suspicions(reference, -reference, -6.0) == [
        "SQNR -6.0 dB: more error than signal"]
    assert execute._accuracy_suspicions(reference, reference * 1.01, 40.0) == []


@pytest.fixture
def counted_builds(monkeypatch):
    """Compiles and dynamo resets counted, the models compiled kept in `models` and, per
    call, whether inductor's caches were off in `fresh`; `torch.compile` left out (it is
    slow on CPU)."""
    import torch

    seen = {"compiles": 0, "resets": 0}
    models, fresh = [], []

    def compile_(model, mode):
        seen["compiles"] += 1
        models.append(model)

        first = True

        def call(data):
            nonlocal first
            if first:  # where torch.compile would compile
                fresh.append(torch.compiler.config.force_disable_caches)
                first = False
            return model(data)
        return call

    def reset():
        seen["resets"] += 1

    monkeypatch.setattr(execute, "_compile", compile_)
    monkeypatch.setattr(torch._dynamo, "reset", reset)
    return SimpleNamespace(counts=seen, models=models, fresh=fresh)


def test_a_compiled_cell_is_measured_in_independent_builds_and_combined(
        make_cell, counted_builds, monkeypatch):
    readings = iter([timing(1.5), timing(0.279), timing(0.505)])  # eager, build 1, build 2
    monkeypatch.setattr(execute, "measure_pair", lambda *args: next(readings))
    settings = dataclasses.replace(FAST, builds=2)
    result = run_cell(make_cell("int8wo", compile_mode="default"), settings)
    assert result.status == "ok", result.reason
    assert counted_builds.counts == {"compiles": 4, "resets": 2}  # both sides, each afresh
    # build 2 compiles models made again (in new memory) with inductor's caches off
    first, second = counted_builds.models[:2], counted_builds.models[2:]
    assert not {id(m) for m in first} & {id(m) for m in second}
    assert first[0].linear1.weight.data_ptr() != second[0].linear1.weight.data_ptr()
    assert counted_builds.fresh == [True] * 4
    assert [b.speedup for b in result.builds] == [0.279, 0.505]
    assert result.compiled is result.builds[0]  # its times are the ones recorded
    assert result.unstable and result.compiled_combined.ci == (0.279 * 0.99, 0.505 * 1.01)
    assert any(note.startswith("compiled builds disagree: 0.279x") for note in result.notes)
    info = headline(result)
    assert [b["speedup"] for b in info["builds"]] == [0.279, 0.505]
    assert {"ci_low", "ci_high", "pairs"} <= info["builds"][0].keys()
    assert (info["ci_low"], info["ci_high"]) == result.compiled_combined.ci
    assert info["unstable"] is True and info["builds_disagree"] is True
    assert result.speedup == result.compiled_speedup == info["speedup"]
    data = json.loads(json.dumps(result.to_dict()))
    assert CellResult.from_dict(data) == result


def test_an_eager_cells_builds_differ_in_placement_and_an_offset_between_them_widens_it(
        make_cell, monkeypatch):
    """On CPU one spec's int8dq cell read 0.218x, 0.233x and 0.253x in three processes, each
    within +-2 %: where its models lie in memory moves the bf16 side. A second build, on
    models and input made again while the first build's still live, reads another placement,
    and the interval holds both."""
    readings = iter([timing(0.233), timing(0.253)])  # build 1, build 2
    monkeypatch.setattr(execute, "measure_pair", lambda *args: next(readings))
    made = []
    real_fresh_sides = execute._fresh_sides

    def fresh_sides(*args):
        made.append(real_fresh_sides(*args))
        return made[-1]

    monkeypatch.setattr(execute, "_fresh_sides", fresh_sides)
    result = run_cell(make_cell("int8dq"), FAST)
    assert result.status == "ok", result.reason
    assert len(made) == 1  # build 2 made both models again
    assert [b.speedup for b in result.eager_builds] == [0.233, 0.253]
    assert result.eager is result.eager_builds[0]  # its times are the ones recorded
    assert result.unstable and result.headline.ci == (0.233 * 0.99, 0.253 * 1.01)
    assert any(note.startswith("eager builds disagree: 0.233x") for note in result.notes)
    info = headline(result)
    assert (info["ci_low"], info["ci_high"]) == result.headline.ci
    assert info["builds_disagree"] is True and info["unstable"] is True
    assert result.speedup == info["speedup"]
    data = json.loads(json.dumps(result.to_dict()))
    assert CellResult.from_dict(data) == result


def test_one_build_when_asked(make_cell, monkeypatch):
    monkeypatch.setattr(execute, "_fresh_sides", lambda *args: pytest.fail("a second build"))
    result = run_cell(make_cell("int8wo"), dataclasses.replace(FAST, builds=1))
    assert result.status == "ok", result.reason
    assert result.eager_builds == [] and "builds" not in headline(result)


def test_compiled_cells_on_cpu_build_once_unless_asked(make_cell, counted_builds):
    result = run_cell(make_cell("int8wo", compile_mode="default"), FAST)
    assert result.status == "ok", result.reason
    assert counted_builds.counts == {"compiles": 2, "resets": 1} and result.builds == []
    assert counted_builds.fresh == [False] * 2  # one build: the caches as they are
    assert "builds" not in headline(result)


def test_a_first_compile_that_spends_the_budget_leaves_both_builds_timed_by_the_timer(
        make_cell, counted_builds, monkeypatch):
    """On an H200 a first process's float8 compile took 61 s of a 60 s budget: the one
    host-timed pair left read the bf16 call at 0.195 ms (0.016 ms on the GPU), and the
    second build was skipped. Now the cheap calls get the timer's least measurement, and
    the second build a budget of its own."""
    clock = FakeClock()
    monkeypatch.setattr(execute, "clock", clock)
    fake_compile = execute._compile  # counted_builds' own
    compiled_calls = []

    def slow_first_compile(model, mode):
        call = fake_compile(model, mode)

        def first_call_compiles(data):
            compiled_calls.append(model)
            if len(compiled_calls) == 1:
                clock.now += 61.0
            return call(data)
        return first_call_compiles

    monkeypatch.setattr(execute, "_compile", slow_first_compile)
    budgets = []

    def measure_pair(baseline, candidate, device, settings):
        budgets.append((settings.min_pairs, settings.cell_budget_s))
        clock.now += 1.0
        return timing(0.85)

    monkeypatch.setattr(execute, "measure_pair", measure_pair)
    monkeypatch.setattr(execute, "sample_pairs", lambda *args, **kwargs: pytest.fail(
        "cheap calls timed one per block"))
    settings = dataclasses.replace(FAST, builds=2, cell_budget_s=60.0)
    result = run_cell(make_cell("int8wo", compile_mode="default"), settings)
    assert result.status == "ok", result.reason
    assert counted_builds.counts == {"compiles": 4, "resets": 2}
    # eager within the budget; build 1 past it: its least measurement; build 2 its own
    assert budgets == [(6, 60.0), (6, math.inf), (6, 60.0)]
    assert "compiled (build 1): 0.0 s left of the cell budget, the least measurement " \
           "(6 pairs) all the same: the calls are cheap" in result.notes
    assert len(result.builds) == 2 and not result.compiled_combined.short
    assert not any("skipped" in note or "from 1 of" in note for note in result.notes)


def test_a_compiled_cells_autotuning_is_a_part_of_its_compile_of_its_own(
        make_cell, counted_builds, monkeypatch):
    """torchao's configs turn coordinate descent tuning on: on an H200 it took 7.8-21 s of
    an int8dq build's 11-22 s. The records say how much of a cell's compile it was."""
    import torch

    metrics = {}
    monkeypatch.setattr(torch._dynamo.utils, "compilation_time_metrics", metrics)
    clock = FakeClock()
    monkeypatch.setattr(execute, "clock", clock)
    fake_compile = execute._compile

    def tuning_compile(model, mode):
        call, first = fake_compile(model, mode), [True]

        def first_call_tunes(data):
            if first.pop() if first else False:
                clock.now += 3.0
                metrics.setdefault("CachingAutotuner.coordinate_descent_tuning", []).append(2.0)
            return call(data)
        return first_call_tunes

    monkeypatch.setattr(execute, "_compile", tuning_compile)
    monkeypatch.setattr(execute, "measure_pair", lambda *args: timing(0.8))
    result = run_cell(make_cell("int8wo", compile_mode="default"),
                      dataclasses.replace(FAST, builds=2))
    assert result.status == "ok", result.reason
    assert (result.compile_s, result.autotune_s) == (12.0, 8.0)  # 2 builds of 2 models
    assert (headline(result)["compile_s"], headline(result)["autotune_s"]) == (12.0, 8.0)


def test_a_later_build_the_cell_budget_cut_before_an_interval_is_left_out(
        make_cell, counted_builds, monkeypatch):
    """On an H200 a first float8 cell's second compile used the rest of its budget: one pair
    read 0.586x against build 1's 0.858x and left the speedup without an interval."""
    cut = PairedTiming((1.0,) * 4, (1.7,) * 4, (0.586,), stopped="cell_budget")
    readings = iter([timing(1.5), timing(0.858), cut])  # eager, build 1, build 2
    monkeypatch.setattr(execute, "measure_pair", lambda *args: next(readings))
    result = run_cell(make_cell("int8wo", compile_mode="default"),
                      dataclasses.replace(FAST, builds=2))
    assert result.status == "ok", result.reason
    assert [b.speedup for b in result.builds] == [0.858]
    assert result.compiled_combined.ci is not None and result.unstable
    assert "compiled (build 2) left out of the speedup: the cell budget ran out after 1 " \
           "pairs, too few for an interval" in result.notes
    assert "compiled speedup from 1 of 2 builds: its interval holds no spread between " \
           "builds, the cell is unstable" in result.notes
    info = headline(result)
    assert [b["speedup"] for b in info["builds"]] == [0.858]
    assert info["builds_planned"] == 2 and info["unstable"] is True
    data = json.loads(json.dumps(result.to_dict()))
    assert CellResult.from_dict(data).unstable


def test_a_cuda_cells_gpu_clocks_at_start_and_end_go_to_its_records(make_cell, monkeypatch,
                                                                     tmp_path):
    reads = iter([{"gpu_sm_clock_mhz": 1980.0, "gpu_throttle_reasons": "0x0"},
                  {"gpu_sm_clock_mhz": 1410.0, "gpu_throttle_reasons": "0x20"}])
    monkeypatch.setattr(execute, "gpu_clocks", lambda: next(reads))
    cell = make_cell("int8wo", device="cuda")
    result = CellResult(cell, "ok")
    execute._read_gpu(cell, result, "start")
    execute._read_gpu(cell, result, "end")
    assert result.gpu_state == {"start": {"gpu_sm_clock_mhz": 1980.0,
                                          "gpu_throttle_reasons": "0x0"},
                                "end": {"gpu_sm_clock_mhz": 1410.0,
                                        "gpu_throttle_reasons": "0x20"}}
    assert result.notes == ["GPU clocks moved during the cell: SM clock 1980 -> 1410 MHz; "
                            "throttle reasons 0x20 (software thermal slowdown)"]

    measured = run_cell(make_cell("int8wo"), FAST)
    measured.gpu_state = result.gpu_state
    for record in records(measured):
        assert record["metric"]["extra_info"]["gpu_state"] == result.gpu_state
        assert record["metric"]["extra_info"]["clocks_moved"] is True
    assert TimingSettings().cell_budget_s == 60.0 and TimingSettings().builds == 0


def test_rotated_copies_are_models_made_again_that_run_this_builds_compiled_code(
        make_cell, monkeypatch):
    """TimingSettings.rotate_weights times each side over copies of its model. On CPU (the
    GPU's L2 faked at the quantized model's size: four copies), compiled copies compile
    nothing more and each reads its own weights."""
    import functools

    import torch
    from torch._dynamo.utils import counters

    cell = make_cell("int8wo", compile_mode="default")
    recipe, config = cell.recipe(), cell.recipe().build()
    torch.manual_seed(0)
    baseline, data = models.build("linear", 16, 256, 256, torch.bfloat16, "cpu")
    quantized = execute._fresh_sides(baseline, recipe, config)[1]
    with monkeypatch.context() as patched:
        l2_bytes = models.model_bytes(quantized)
        patched.setattr(torch.cuda, "current_device", lambda: 0)
        patched.setattr(torch.cuda, "get_device_properties",
                        lambda device: SimpleNamespace(L2_cache_size=l2_bytes))
        count = execute._rotation_count(quantized)
        assert count == execute.ROTATION_L2
        # copies of a model this small would all fit L2: no rotation (L2 flushed instead)
        patched.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(
            L2_cache_size=l2_bytes * execute.MAX_ROTATION))
        assert execute._rotation_count(quantized) is None
    fresh = functools.partial(execute._fresh_sides, baseline, recipe, config)
    torch._dynamo.reset()
    with torch.no_grad():
        first = execute._compile(baseline, "default"), execute._compile(quantized, "default")
        for side in first:
            side(data)
        compiled = counters["stats"]["unique_graphs"]
        sides = execute._rotations(*first, data, fresh, "default", count)
        assert [len(side.calls) for side in sides] == [execute.ROTATION_L2] * 2
        modules = [call.func._orig_mod for call in sides[0].calls]
        assert len({module.linear1.weight.data_ptr() for module in modules}) == 4
        modules[2].linear1.weight.mul_(-1)  # a copy's own weights, read by the shared code
        outputs = [call() for call in sides[0].calls]
        assert counters["stats"]["unique_graphs"] == compiled  # nothing compiled again
        assert torch.equal(outputs[0], outputs[1])
        assert not torch.allclose(outputs[0].float(), outputs[2].float())
        assert torch.allclose(outputs[2].float(), modules[2](data).float(), atol=1e-2)
        assert all(call().shape == outputs[0].shape for call in sides[1].calls)
    assert counters["stats"]["unique_graphs"] == compiled


def test_cells_rotate_weights_only_on_cuda_graphs_with_l2_flushed(make_cell):
    rotate = dataclasses.replace(FAST, rotate_weights=True)
    assert execute._rotating(make_cell("int8wo", device="cuda"), rotate)
    assert not execute._rotating(make_cell("int8wo"), rotate)  # CPU
    assert not execute._rotating(make_cell("int8wo", device="cuda"), FAST)  # not asked
    for other in (dataclasses.replace(rotate, flush_l2=False),
                  dataclasses.replace(rotate, gpu_method="batched")):
        assert not execute._rotating(make_cell("int8wo", device="cuda"), other)
