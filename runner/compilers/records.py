"""A results line as PyTorch OSS benchmark ("v3") records, shaped like the PyTorch HUD's
TorchInductor records so the compilers dashboard reads runner output and the HUD's alike.

benchmark.name is "TorchInductor" (the name the HUD's compilers dashboard reads, whatever the
backend); mode is "inference" for eval and "training" for train; model.backend is the
configuration's backend and model.origins its suite. Metrics:

- speedup: over eager, timed paired in the backend's own process (runner.engine.paired): every
  pair's ratio as values, the 95% interval, pair count and `unstable` in extra_info (not
  written for eager itself);
- abs_latency: per-iteration time per repetition, in ms;
- compilation_latency: the first call's time less a median iteration, in s;
- compression_ratio: eager's peak memory over this backend's (the HUD's ratio);
- peak_memory (MB, with what kind in metric.extra_info) and graph_breaks;
- accuracy: a string, as the HUD writes it, mapped from the verification code. It is written
  whenever the configuration was verified or did not run through (so failures stay visible);
  a configuration that ran but was not verified has no accuracy.
"""

from __future__ import annotations

import statistics
from typing import Any

from runner.compilers.matrix import EAGER, Config
from runner.compilers.verify import Code
from runner.contract.metrics import number_metric, string_metric
from runner.contract.names import COMPILERS_BENCHMARK, COMPILERS_MODES, CompilerMetric
from runner.engine.paired import PairedTiming, speedup_metric
from runner.engine.run_context import RunContext

ACCURACY = {  # verification code -> the HUD's accuracy string
    Code.PASS: "pass",
    Code.FAIL: "fail_accuracy",
    Code.EAGER_FAILED: "eager_fail_to_run",
    Code.EXCEPTION_RAISED: "fail_to_run",
    Code.NONDETERMINISTIC_EAGER_RUN: "eager_two_runs_differ",
    Code.VERIFIER_SKIPPED: "pass_due_to_skip",  # the model asked to skip verification
    Code.VERIFIER_DIDNT_RUN: "fail_to_run",
}


def build(config: Config, result: dict[str, Any], baseline: dict[str, Any] | None,
          context: RunContext) -> list[dict[str, Any]]:
    """The records of one configuration's line; `baseline` is its eager line, if any."""
    metrics = result["metrics"]
    code = Code(result["verification_code"])
    shared = {"repeat": result["repeat"], "iterations_per_run": result["iterations_per_run"],
              "verification_code": str(code)}
    found = []
    times = metrics.get("per_iter_time")
    if times:
        found.append(number_metric(CompilerMetric.LATENCY, [1e3 * t for t in times], "ms",
                                   **shared))
    if "paired" in metrics:
        paired = PairedTiming.from_dict(metrics["paired"])
        found.append(speedup_metric(CompilerMetric.SPEEDUP, paired,
                                    eager_ms=statistics.median(paired.baseline_ms), **shared))
    if "compile_time" in metrics:
        found.append(number_metric(CompilerMetric.COMPILE_TIME, [metrics["compile_time"]], "s",
                             **shared))
    peak = metrics.get("peak_memory_mb")
    if peak is not None:
        kind = metrics.get("peak_memory_kind")
        found.append(number_metric(CompilerMetric.MEMORY, [peak], "MB", kind=kind, **shared))
        eager_peak = (baseline or {}).get("metrics", {}).get("peak_memory_mb")
        if config.backend != EAGER and eager_peak and peak > 0:
            found.append(number_metric(CompilerMetric.COMPRESSION, [eager_peak / peak], "x",
                                 kind=kind, **shared))
    if "graph_breaks" in metrics:
        found.append(number_metric(CompilerMetric.GRAPH_BREAKS, [metrics["graph_breaks"]], "count",
                             **shared))
    accuracy = _accuracy(config, code, metrics)
    if accuracy:
        error = (metrics.get("error") or "").strip().splitlines()
        found.append(string_metric(CompilerMetric.ACCURACY, accuracy, **shared,
                                   **({"error": error[-1]} if error else {})))
    return [_record(config, metric, context) for metric in found]


def _accuracy(config: Config, code: Code, metrics: dict[str, Any]) -> str | None:
    if metrics.get("timed_out"):
        return "timeout"
    if "error" in metrics:
        return ACCURACY[code] if code != Code.VERIFIER_SKIPPED else "fail_to_run"
    if config.verify:
        return ACCURACY[code]
    return None




def _record(config: Config, metric: dict[str, Any], context: RunContext) -> dict[str, Any]:
    return {
        "benchmark": {
            "name": COMPILERS_BENCHMARK,
            "mode": COMPILERS_MODES[config.test],
            "dtype": config.dtype,
            "extra_info": {"device": config.device, "arch": context.arch(config.device),
                           "batch_size": config.effective_batch_size},
        },
        "model": {"name": config.model.name, "type": "model", "backend": config.backend,
                  "origins": [config.model.suite]},
        "metric": metric,
        "runners": context.runners(config.device),
        "dependencies": context.dependencies(),
    }
