"""Running cells: baseline and quantized model timed together, eager and compiled, each cell
isolated.

A cell keeps to its wall budget (TimingSettings.cell_budget_s, compiles included), and each
build of its headline after the first to a budget of its own, so that a slow first compile
does not cost the headline its second build: each speedup's pairs get what is left of it,
and a side whose call is slow against that is timed one call per block without the timer's
warm-up. Cheap calls are measured at least LEAST_PAIRS pairs by the usual timer even once
the budget is spent (under LEAST_MEASUREMENT_S of calls): on an H200 a first process's
float8 compile spent a 60 s budget, and the one host-timed pair left read a 0.0163 ms bf16
call as 0.195 ms. A cell overruns by at most that least measurement, one pair of slow
calls, and the profile of a suspect cell.

A quantized model far slower than bf16, or with an SQNR that makes no sense, is kept as
measured but marked `suspect`, with its top kernels. On CUDA the GPU's clocks are read as
the timing starts and ends.

A cell this machine cannot run is "skipped" with the reason; an exception (out-of-memory
included) makes it "failed" with the error; either way the next cell runs. Ctrl-C is not
caught here, so a caller can stop and still write what finished.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
import math
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from runner.contract.status import FAILED, OK, SKIPPED
from runner.engine.gpu_blocks import Rotation
from runner.engine.machine_state import gpu_clocks, load_average
from runner.engine.paired import (
    LEAST_PAIRS,
    STOPPED_CELL_BUDGET,
    PairedTiming,
    cell_budget_note,
    sample_pairs,
)
from runner.engine.timing_data import CUDA_GRAPH, TimingSettings
from runner.engine.torch_devices import device_problem, release_memory
from runner.engine.torch_timers import measure_pair
from runner.quant import models
from runner.quant.cells import QuantCell
from runner.quant.recipes import Recipe
from runner.quant.results import CellResult
from runner.quant.spec import Spec

logger = logging.getLogger(__name__)

PROFILED_CALLS = 5
MEMORY_HISTORY_ENTRIES = 100_000
MB = 2**20
# Builds of a cell's headline speedup when TimingSettings.builds is 0 (auto): eager, and
# compiled on CUDA (one compiled build on CPU, where a compile costs seconds).
EAGER_BUILDS = 2
CUDA_BUILDS = 2
# Calls this cheap (both sides, as often as the least measurement makes them) get that
# measurement by the usual timer even when the cell's budget is spent.
LEAST_MEASUREMENT_S = 1.0
# dynamo's timed phases of Triton's autotuning (they do not nest in each other)
AUTOTUNE_PHASES = ("CachingAutotuner.benchmark_all_configs",
                   "CachingAutotuner.coordinate_descent_tuning")
# Rotated weights (TimingSettings.rotate_weights): the copies of the quantized model hold at
# least ROTATION_L2 times L2 together (perf/gpu_cost_probe.py's rotation). A model so small
# that MAX_ROTATION copies would not is timed with L2 flushed before each call instead.
ROTATION_L2 = 4
MAX_ROTATION = 64
SUSPECT_SPEEDUP = 0.1  # a quantized model at least 10x slower than bf16 is suspect
SUSPECT_PROFILED_CALLS = 3
TOP_KERNELS = 5

clock = time.perf_counter  # of the cell's budget; tests put a fake one here


def run_spec(
    spec: Spec | Iterable[QuantCell],
    settings: TimingSettings | None = None,
    on_cell: Callable[[CellResult], None] | None = None,
) -> list[CellResult]:
    """Run every cell in order; `on_cell` sees each result as soon as it exists."""
    cells = spec.cells() if isinstance(spec, Spec) else list(spec)
    results = []
    for cell in cells:
        result = run_cell(cell, settings)
        results.append(result)
        if on_cell is not None:
            on_cell(result)
    return results


def run_cell(cell: QuantCell, settings: TimingSettings | None = None) -> CellResult:
    settings = settings or TimingSettings()
    started = clock()
    result = CellResult(cell, OK, settings=settings, load_avg={"start": load_average()})
    try:
        _run(cell, settings, result, started + settings.cell_budget_s)
    except _Skip as skip:
        result.status, result.reason = SKIPPED, str(skip)
        _clear_measurements(result)
    except torch.OutOfMemoryError as error:
        logger.warning("cell %s ran out of memory", cell.key, exc_info=True)
        _fail(result, f"out of memory: {error}")
    except Exception as error:
        logger.warning("cell %s failed", cell.key, exc_info=True)
        _fail(result, f"{type(error).__name__}: {error}")
    if cell.device == "cuda" or result.status == FAILED:
        release_memory()
    result.wall_s = clock() - started
    result.load_avg["end"] = load_average()
    return result


class _Skip(Exception):
    """The cell cannot run on this machine; the message says why."""


def _fail(result: CellResult, error: str) -> None:
    result.status, result.reason = FAILED, error
    result.traceback = traceback.format_exc()
    _clear_measurements(result)


def _clear_measurements(result: CellResult) -> None:
    result.eager = result.compiled = None
    result.eager_builds, result.builds = [], []
    result.sqnr_db = result.peak_memory_mb = None


def _run(cell: QuantCell, settings: TimingSettings, result: CellResult,
         deadline: float) -> None:
    recipe = cell.recipe()
    reason = device_problem(cell.device) or recipe.requires.unmet(cell.device)
    if reason:
        raise _Skip(reason)
    _measure(cell, recipe, recipe.build(), settings, result, deadline)


def _measure(
    cell: QuantCell,
    recipe: Recipe,
    config: Any,
    settings: TimingSettings,
    result: CellResult,
    deadline: float,
) -> None:
    """The baseline and the quantized model timed together (runner.engine.paired): eager, then
    compiled when the cell compiles. The baseline is timed again in every cell, interleaved
    with that cell's model: a baseline timed once, earlier, would carry that moment's load."""

    if cell.compile_mode:
        torch._dynamo.reset()  # fresh recompile budget: every cell compiles new modules
    s = cell.shape
    torch.manual_seed(0)
    baseline, data = models.build(
        cell.model_type, s.m, s.k, s.n, getattr(torch, cell.dtype), cell.device
    )
    with torch.no_grad():
        reference = baseline(data)
        model = copy.deepcopy(baseline)
        recipe.apply(model, config)
        if not recipe.is_baseline:
            _check_quantized(model, recipe.label, result)
        output = model(data)
        result.sqnr_db = _sqnr_db(reference, output)
        suspicions = [] if recipe.is_baseline else _accuracy_suspicions(
            reference, output, result.sqnr_db)
        result.flops = models.flops(cell.model_type, s.m, s.k, s.n)
        result.quantized_bytes = models.tensor_bytes(data) + models.tensor_bytes(output)
        result.quantized_bytes += models.model_bytes(model)
        del reference, output

        fresh_sides = functools.partial(_fresh_sides, baseline, recipe, config)
        _read_gpu(cell, result, "start")
        main = _time_pairs(cell, (baseline, model), fresh_sides, data, settings, deadline,
                           result)
        _read_gpu(cell, result, "end")
        del baseline, fresh_sides  # not part of the quantized model's peak memory
        if cell.device == "cuda":
            result.peak_memory_mb = _peak_memory_mb(lambda: main(data))
        if not recipe.is_baseline:
            suspicions += _timing_suspicions(result)
        if suspicions:
            _mark_suspect(cell, lambda: main(data), "; ".join(suspicions), deadline, result)
        _write_artifacts(cell, lambda: main(data), result)


def _fresh_sides(baseline: Any, recipe: Recipe, config: Any) -> tuple[Any, Any]:
    """Both models again, in new memory, for a build after the first."""
    quantized = copy.deepcopy(baseline)
    recipe.apply(quantized, config)
    return copy.deepcopy(baseline), quantized


def _time_pairs(cell: QuantCell, sides: tuple[Any, Any],
                fresh_sides: Callable[[], tuple[Any, Any]], data: torch.Tensor,
                settings: TimingSettings, deadline: float, result: CellResult) -> Any:
    """Eager, then compiled when the cell compiles; the headline model (compiled or not).
    The headline speedup is measured in independent builds (`_builds`): eager in
    EAGER_BUILDS unless the cell compiles, compiled in CUDA_BUILDS on CUDA, one on CPU
    (where a compile costs seconds); TimingSettings.builds sets both."""
    eager_planned = 1 if cell.compile_mode else settings.builds or EAGER_BUILDS
    if not cell.compile_mode:
        result.builds_planned = eager_planned
    eager, model = _builds(cell, "eager", sides, fresh_sides, data, eager_planned, settings,
                           deadline, result)
    result.eager = eager[0]
    if eager_planned > 1:
        result.eager_builds = eager
        _note_disagreement(result.eager_combined, "eager", result)
    if not cell.compile_mode:
        return model
    planned = settings.builds or (CUDA_BUILDS if cell.device == "cuda" else 1)
    result.builds_planned = planned
    builds, compiled = _builds(cell, "compiled", sides, fresh_sides, data, planned, settings,
                               deadline, result, compile_mode=cell.compile_mode)
    result.compiled = builds[0]
    if planned > 1:
        result.builds = builds
        _note_disagreement(result.compiled_combined, "compiled", result)
    return compiled


def _note_disagreement(combined: Any, what: str, result: CellResult) -> None:
    note = combined.disagreement(what)
    if note:
        result.notes.append(note)


def _builds(cell: QuantCell, what: str, sides: tuple[Any, Any],
            fresh_sides: Callable[[], tuple[Any, Any]], data: torch.Tensor, planned: int,
            settings: TimingSettings, deadline: float, result: CellResult,
            compile_mode: str | None = None) -> tuple[list[PairedTiming], Any]:
    """`planned` builds of one speedup, each timed in its own pairs, a build after the
    first within a cell budget of its own from its start. Builds differ in what a new process
    would: where the weights and the input lie in memory (a build after the first makes
    both models and the input again, while the earlier ones still hold theirs: on CPU a
    bf16 linear of 16x256x256 read 4-11 % slower in some placements, and one spec's
    int8dq cell 0.218x, 0.233x and 0.253x in three processes, each within +-2 %,
    perf/gpu_check.py) and, compiled, the compiled code and its Triton configs (each build
    compiles afresh without inductor's caches). The builds' timings and the last build's
    headline model (compiled where `compile_mode`). The speedup's pairs are shared among its
    builds (each gets 1/`planned` of `budget_s` and of `min_pairs`, at least LEAST_PAIRS), so
    that more builds cost warm-ups and compiles, not more pairs. A build after the first whose
    pairs the cell budget cut before they had an interval is left out, and said: on an H200
    a first float8 cell's second compile left one pair, which read 0.586x against 0.858x and
    took the speedup's interval away. Fewer builds than planned make the speedup unstable
    (runner.engine.build_spread)."""
    if planned > 1:
        settings = replace(settings, budget_s=settings.budget_s / planned, min_pairs=max(
            LEAST_PAIRS, math.ceil(settings.min_pairs / planned)))
    baseline, model = sides
    builds: list[PairedTiming] = []
    for number in range(1, planned + 1):
        if number > 1:
            deadline = clock() + settings.cell_budget_s
            baseline, model = fresh_sides()
            data = data.clone()
        if compile_mode:
            if number > 1:
                torch._dynamo.reset()  # a fresh compile of both sides, as another process would
            baseline, model = _compile(baseline, compile_mode), _compile(model, compile_mode)
            compiling, tuned = clock(), _autotune_s()
            with _fresh_caches(planned > 1):
                for side in (baseline, model):
                    side(data)  # compiles here, on the cell's budget, before a call is timed
            result.compile_s += clock() - compiling
            result.autotune_s += max(_autotune_s() - tuned, 0.0)
        label = what if planned == 1 else f"{what} (build {number})"
        calls = functools.partial(baseline, data), functools.partial(model, data)
        rotating = _rotating(cell, settings)
        count = _rotation_count(model) if rotating else None
        if count is not None:
            calls = _rotations(baseline, model, data, fresh_sides, compile_mode, count)
        elif rotating and number == 1:
            result.notes.append(f"{what}: weights not rotated: {MAX_ROTATION} copies would "
                                "fit L2; L2 evicted before each call instead")
        timing = _paired(cell, label, *calls, settings, deadline, result)
        if builds and timing.ci is None and timing.stopped == STOPPED_CELL_BUDGET:
            result.notes.append(f"{label} left out of the speedup: the cell budget ran out "
                                f"after {timing.pairs} pairs, too few for an interval")
            continue
        builds.append(timing)
    if len(builds) < planned:
        result.notes.append(f"{what} speedup from {len(builds)} of {planned} builds: its "
                            "interval holds no spread between builds, the cell is unstable")
    return builds, model


def _rotating(cell: QuantCell, settings: TimingSettings) -> bool:
    """Whether the sides are timed over copies of their models (TimingSettings.rotate_weights,
    runner.engine.gpu_blocks.Rotation)."""
    return (cell.device == "cuda" and settings.rotate_weights and settings.flush_l2
            and settings.gpu_method == CUDA_GRAPH)


def _rotation_count(model: Any) -> int | None:
    """Copies of the quantized model that hold ROTATION_L2 times the GPU's L2 together; None
    where that takes more than MAX_ROTATION: copies that all fit L2 would be timed warm."""
    cuda = torch.cuda
    l2_bytes = cuda.get_device_properties(cuda.current_device()).L2_cache_size
    count = math.ceil(ROTATION_L2 * l2_bytes / max(models.model_bytes(model), 1))
    return count if count <= MAX_ROTATION else None


def _rotations(baseline: Any, model: Any, data: torch.Tensor,
               fresh_sides: Callable[[], tuple[Any, Any]], compile_mode: str | None,
               count: int) -> tuple[Rotation, Rotation]:
    """Each side's call on `count` copies of its model: this build's, and more made again in
    new memory. Compiled, a copy runs the code this build compiled (on CPU three copies of a
    compiled int8wo model compiled nothing more, and each read its own weights)."""
    copies = [(baseline, model)]
    for _ in range(count - 1):
        other, quantized = fresh_sides()
        if compile_mode:
            other, quantized = _compile(other, compile_mode), _compile(quantized, compile_mode)
        copies.append((other, quantized))
    return (Rotation(tuple(functools.partial(side, data) for side, _ in copies)),
            Rotation(tuple(functools.partial(side, data) for _, side in copies)))


def _paired(cell: QuantCell, what: str, baseline_call: Callable[[], object],
            quantized_call: Callable[[], object], settings: TimingSettings, deadline: float,
            result: CellResult) -> PairedTiming:
    """One speedup within what is left of the cell's budget. When a call of each side, as
    often as the timer would make it at least, does not fit what is left, cheap calls (that
    often within LEAST_MEASUREMENT_S) get the timer's least measurement all the same, and
    slow ones are timed one call per block with no warm-up but this one call: the timer's
    warm-up alone runs a few calls of each side, whatever they cost."""
    cost = _call_s(baseline_call, cell.device) + _call_s(quantized_call, cell.device)
    least_s = cost * _least_calls(settings)
    left = deadline - clock()
    within = replace(settings, cell_budget_s=max(left, 0.0))
    if least_s <= left:
        timing = measure_pair(baseline_call, quantized_call, cell.device, within)
    elif least_s <= LEAST_MEASUREMENT_S:
        result.notes.append(f"{what}: {max(left, 0):.1f} s left of the cell budget, the "
                            f"least measurement ({LEAST_PAIRS} pairs) all the same: the calls "
                            "are cheap")
        least = replace(settings, min_pairs=LEAST_PAIRS, budget_s=0.0, cell_budget_s=math.inf)
        timing = measure_pair(baseline_call, quantized_call, cell.device, least)
    else:
        result.notes.append(f"{what}: one call per block, no warm-up: a call of both sides "
                            f"took {cost:.2f} s, {max(left, 0):.1f} s left of the cell budget")
        timing = sample_pairs(_one_call(baseline_call, cell.device),
                              _one_call(quantized_call, cell.device), within, clock=clock)
    result.measured_s += timing.measured_s
    for note in (timing.instability(what), cell_budget_note(timing, what, settings)):
        if note:
            result.notes.append(note)
    return timing


def _least_calls(settings: TimingSettings) -> int:
    """The fewest calls of each side the timer makes: a first call, three warm-up calls,
    then four blocks of at least one call per pair."""
    return 4 + 4 * max(settings.min_pairs, LEAST_PAIRS)


def _call_s(call: Callable[[], object], device: str) -> float:
    """Seconds of one call, on the cell's clock."""
    started = clock()
    call()
    if device == "cuda":
        torch.cuda.synchronize()
    return clock() - started


def _one_call(call: Callable[[], object], device: str) -> Callable[[], float]:
    return lambda: _call_s(call, device) * 1000


def _read_gpu(cell: QuantCell, result: CellResult, when: str) -> None:
    """CUDA: the GPU's clocks, temperature and power now; a note once they moved."""
    if cell.device != "cuda":
        return
    result.gpu_state[when] = gpu_clocks()
    moved = result.clocks_moved
    if moved:
        result.notes.append(f"GPU clocks moved during the cell: {moved}")


def _compile(model: Any, mode: str) -> Any:
    return torch.compile(model, mode=mode, fullgraph=True)


def _autotune_s() -> float:
    """Seconds so far in Triton's autotuning at compiled models' first calls, by dynamo's
    compile metrics (reset with dynamo). torchao's configs turn coordinate descent tuning on
    (`set_inductor_config`): on an H200 it took 7.8-21 s of an int8dq build's 11-22 s
    (perf/gpu_cost_probe.py)."""
    metrics = getattr(torch._dynamo.utils, "compilation_time_metrics", {})
    return sum(sum(metrics.get(phase, ())) for phase in AUTOTUNE_PHASES)


def _fresh_caches(independent: bool) -> Any:
    """Independent builds compile without inductor's caches: each picks its Triton configs
    by its own benchmark at the first call, as a new process does. With the caches, builds
    in one process reuse the first pick and agree while processes do not (int8dq compiled
    at 32x4096x4096 read 0.43 and 0.51 in two processes on an H100, each process's builds
    within 1 % of each other)."""
    if not independent:
        return contextlib.nullcontext()
    return torch.compiler.config.patch(force_disable_caches=True)


def _check_quantized(model: Any, label: str, result: CellResult) -> None:
    """torchao leaves weights it cannot handle as they are; do not time that as the recipe."""
    plain, total = models.unquantized_linears(model)
    if total and plain == total:
        raise _Skip(
            f"{label} left all {total} linear weights unchanged "
            "(torchao skips shapes the recipe does not support)"
        )
    if plain:
        result.notes.append(f"{plain} of {total} linear weights left unquantized by {label}")


def _accuracy_suspicions(reference: torch.Tensor, output: torch.Tensor,
                         sqnr_db: float | None) -> list[str]:
    """What makes no sense in a quantized output: NaN or inf where bf16 had none, or more
    error than signal."""
    if bool(torch.isfinite(reference).all()) and not bool(torch.isfinite(output).all()):
        return ["quantized output holds NaN or inf"]
    if sqnr_db is not None and sqnr_db < 0:
        return [f"SQNR {sqnr_db:.1f} dB: more error than signal"]
    return []


def _timing_suspicions(result: CellResult) -> list[str]:
    speedup = result.speedup
    if speedup is None or speedup > SUSPECT_SPEEDUP:
        return []
    slower = f"{1 / speedup:,.0f}x" if speedup > 0 else "infinitely"
    return [f"speedup {speedup:.4f}x: the quantized model {slower} slower than bf16"]


def _mark_suspect(cell: QuantCell, forward: Callable[[], object], why: str, deadline: float,
                  result: CellResult) -> None:
    """Keep the numbers, say why they are suspect and what the quantized model's time went
    to: the top kernels of a few profiled calls (one once the budget is spent)."""
    calls = SUSPECT_PROFILED_CALLS if clock() < deadline else 1
    result.suspect = why
    result.top_kernels = _top_kernels(forward, cell.device, calls)
    top = result.top_kernels[0] if result.top_kernels else None
    result.notes.append(f"suspect: {why}" + (
        f"; top kernel {top['name']} ({top['total_ms']:.3f} ms in {calls} calls)" if top
        else ""))


def _top_kernels(forward: Callable[[], object], device: str, calls: int) -> list[dict]:
    """The TOP_KERNELS events with the most self time over `calls` calls: CUDA kernels by
    device time on CUDA, CPU ops by CPU time on CPU."""
    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as profiler:
        for _ in range(calls):
            forward()
        if device == "cuda":
            torch.cuda.synchronize()
    events = profiler.key_averages()
    if device == "cuda":
        timed = [(event, event.self_device_time_total) for event in events
                 if event.device_type == torch.autograd.DeviceType.CUDA]
    else:
        timed = [(event, event.self_cpu_time_total) for event in events]
    timed.sort(key=lambda pair: pair[1], reverse=True)
    return [{"name": event.key, "total_ms": round(us / 1000, 4), "calls": event.count}
            for event, us in timed[:TOP_KERNELS] if us > 0]


def _sqnr_db(reference: torch.Tensor, output: torch.Tensor) -> float | None:
    reference = reference.float()
    noise = torch.linalg.vector_norm(reference - output.float()).item()
    signal = torch.linalg.vector_norm(reference).item()
    if noise == 0 or signal == 0:
        return None  # identical outputs (the baseline): no finite SQNR
    value = 20 * math.log10(signal / noise)
    return value if math.isfinite(value) else None


def _peak_memory_mb(forward: Callable[[], object]) -> float:
    forward()  # allocations of a first call (workspaces, lazy init) are not the steady state
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    forward()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / MB


def _write_artifacts(cell: QuantCell, forward: Callable[[], object],
                     result: CellResult) -> None:
    if not (cell.enable_profiler or cell.enable_memory_profiler):
        return
    directory = Path(cell.output_dir)
    if cell.enable_profiler:
        path = directory / "profiler" / f"{cell.file_stem}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        _profile(forward, cell.device, path)
        result.artifacts["profiler_json"] = str(path)
    if cell.enable_memory_profiler:
        if cell.device != "cuda":
            result.notes.append("memory snapshot needs CUDA; none written")
            return
        path = directory / "memory" / f"{cell.file_stem}.pickle"
        path.parent.mkdir(parents=True, exist_ok=True)
        _memory_snapshot(forward, path)
        result.artifacts["memory_snapshot"] = str(path)


def _profile(forward: Callable[[], object], device: str, path: Path) -> None:
    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities, record_shapes=True) as profiler:
        for _ in range(PROFILED_CALLS):
            forward()
        if device == "cuda":
            torch.cuda.synchronize()
    profiler.export_chrome_trace(str(path))


def _memory_snapshot(forward: Callable[[], object], path: Path) -> None:
    """A snapshot for https://pytorch.org/memory_viz of one forward pass."""
    torch.cuda.memory._record_memory_history(max_entries=MEMORY_HISTORY_ENTRIES)
    try:
        forward()
        torch.cuda.synchronize()
        torch.cuda.memory._dump_snapshot(str(path))
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
