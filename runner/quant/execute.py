"""Running cells: baseline and quantized model timed together, eager and compiled, each cell
isolated.

A cell this machine cannot run is "skipped" with the reason; an exception (out-of-memory
included) makes it "failed" with the error; either way the next cell runs. Ctrl-C is not
caught here, so a caller can stop and still write what finished.
"""

from __future__ import annotations

import copy
import logging
import math
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from runner.contract.status import FAILED, OK, SKIPPED
from runner.engine.machine_state import load_average
from runner.engine.paired import PairedTiming
from runner.engine.timing_data import TimingSettings
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
    started = time.perf_counter()
    result = CellResult(cell, OK, settings=settings, load_avg={"start": load_average()})
    try:
        _run(cell, settings, result)
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
    result.wall_s = time.perf_counter() - started
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
    result.sqnr_db = result.peak_memory_mb = None


def _run(cell: QuantCell, settings: TimingSettings, result: CellResult) -> None:
    recipe = cell.recipe()
    reason = device_problem(cell.device) or recipe.requires.unmet(cell.device)
    if reason:
        raise _Skip(reason)
    _measure(cell, recipe, recipe.build(), settings, result)


def _measure(
    cell: QuantCell,
    recipe: Recipe,
    config: Any,
    settings: TimingSettings,
    result: CellResult,
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
        result.flops = models.flops(cell.model_type, s.m, s.k, s.n)
        result.quantized_bytes = models.tensor_bytes(data) + models.tensor_bytes(output)
        result.quantized_bytes += models.model_bytes(model)
        del reference, output

        main = _time_pairs(cell, baseline, model, data, settings, result)
        del baseline  # not part of the quantized model's peak memory
        if cell.device == "cuda":
            result.peak_memory_mb = _peak_memory_mb(lambda: main(data))
        _write_artifacts(cell, lambda: main(data), result)


def _time_pairs(cell: QuantCell, baseline: Any, model: Any, data: torch.Tensor,
                settings: TimingSettings, result: CellResult) -> Any:
    """Eager, then compiled when the cell compiles; the headline model (compiled or not)."""

    def paired(what: str, baseline_call: Callable[[], object],
               quantized_call: Callable[[], object]) -> PairedTiming:
        timing = measure_pair(baseline_call, quantized_call, cell.device, settings)
        result.measured_s += timing.measured_s
        note = timing.instability(what)
        if note:
            result.notes.append(note)
        return timing

    result.eager = paired("eager", lambda: baseline(data), lambda: model(data))
    if not cell.compile_mode:
        return model
    compiled_baseline = _compile(baseline, cell.compile_mode)
    compiled = _compile(model, cell.compile_mode)
    result.compiled = paired("compiled", lambda: compiled_baseline(data),
                             lambda: compiled(data))
    return compiled


def _compile(model: Any, mode: str) -> Any:
    return torch.compile(model, mode=mode, fullgraph=True)


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
