"""Writing results: the terminal table and torchao-style CSV."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from runner.contract.status import OK
from runner.engine.folders import write_atomically
from runner.quant.results import CellResult

# torchao's CSV columns, in its order, then ours.
CSV_COLUMNS = (
    "name",
    "quantization",
    "sparsity",
    "m",
    "k",
    "n",
    "high_precision_dtype",
    "torch_compile_mode",
    "device",
    "model_type",
    "output_dir",
    "enable_profiler",
    "enable_memory_profiler",
    "baseline_model_eager_inference_time_in_ms",
    "quantized_model_eager_inference_time_in_ms",
    "baseline_model_compiled_inference_time_in_ms",
    "quantized_model_compiled_inference_time_in_ms",
    "eager speedup on baseline",
    "compile speedup on baseline",
    "eager vs compile speedup",
    "profiler_json_path",
    "memory_profile_path",
    "memory_visualization_path",
    "memory_stats",
    "shape_name",
    "status",
    "reason",
    "sqnr_db",
    "quantized_tflops",
    "quantized_gbps",
    "peak_memory_mb",
)


def csv_row(result: CellResult) -> dict[str, Any]:
    cell = result.cell

    def ms(timing: Any) -> float | None:
        return timing.median_ms if timing else None

    eager_vs_compiled = None
    if result.quantized_eager and result.quantized_compiled:
        eager_vs_compiled = result.quantized_eager.median_ms / result.quantized_compiled.median_ms
    peak = result.peak_memory_mb
    return {
        "name": cell.name,
        "quantization": cell.quantization,
        "sparsity": cell.sparsity,
        "m": cell.shape.m,
        "k": cell.shape.k,
        "n": cell.shape.n,
        "high_precision_dtype": f"torch.{cell.dtype}",
        "torch_compile_mode": cell.compile_mode,
        "device": cell.device,
        "model_type": cell.model_type,
        "output_dir": cell.output_dir,
        "enable_profiler": cell.enable_profiler,
        "enable_memory_profiler": cell.enable_memory_profiler,
        "baseline_model_eager_inference_time_in_ms": ms(result.baseline_eager),
        "quantized_model_eager_inference_time_in_ms": ms(result.quantized_eager),
        "baseline_model_compiled_inference_time_in_ms": ms(result.baseline_compiled),
        "quantized_model_compiled_inference_time_in_ms": ms(result.quantized_compiled),
        "eager speedup on baseline": result.eager_speedup,
        "compile speedup on baseline": result.compiled_speedup,
        "eager vs compile speedup": eager_vs_compiled,
        "profiler_json_path": result.artifacts.get("profiler_json"),
        "memory_profile_path": result.artifacts.get("memory_snapshot"),
        "memory_visualization_path": None,
        "memory_stats": json.dumps({"peak_allocated_mb": peak}) if peak is not None else None,
        "shape_name": cell.shape.name,
        "status": result.status,
        "reason": result.reason,
        "sqnr_db": result.sqnr_db,
        "quantized_tflops": result.tflops,
        "quantized_gbps": result.gbps,
        "peak_memory_mb": peak,
    }


def write_csv(path: Path, results: Iterable[CellResult]) -> None:
    def write(handle: Any) -> None:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(csv_row(result) for result in results)

    write_atomically(path, write, newline="")


def _number(value: float | None, form: str) -> str:
    return "-" if value is None else format(value, form)


def _status(result: CellResult) -> str:
    if result.suspect:
        return "suspect"
    return "unstable" if result.unstable else result.status


def table(results: Iterable[CellResult]) -> str:
    """A plain-text table, one row per cell; skipped and failed cells show why."""
    headers = ("recipe", "model", "shape", "compile", "status", "bf16 ms", "quant ms",
               "speedup", "95% CI", "pairs", "SQNR dB", "note")
    rows = []
    for result in results:
        cell = result.cell
        note = result.reason if result.status != OK else "; ".join(result.notes)
        baseline, quantized, headline = result.baseline, result.quantized, result.headline
        interval = headline.ci if headline else None
        rows.append((
            cell.label,
            cell.model_type,
            f"{cell.shape.name} {cell.shape.m}x{cell.shape.k}x{cell.shape.n}",
            cell.compile_mode or "eager",
            _status(result),
            _number(baseline.median_ms if baseline else None, ".4f"),
            _number(quantized.median_ms if quantized else None, ".4f"),
            _number(result.speedup, ".3f") + ("x" if result.speedup is not None else ""),
            f"{interval[0]:.3f}-{interval[1]:.3f}" if interval else "-",
            str(headline.pairs) if headline else "-",
            _number(result.sqnr_db, ".1f"),
            note or "",
        ))
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(str(value).ljust(width) for value, width in zip(row, widths, strict=True))
             for row in [headers, *rows]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)
