"""Which way is better for a metric.

First an explicit table (our families' metrics and the other writers' metrics the HUD
knows), then, for a metric in neither, inference from its name and unit. Each answer says
which rule gave it, so the admin can show why a metric is judged the way it is; an
administrator's override (regressions.MetricDirection) comes before both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner.contract.names import (
    COMPILERS_BENCHMARK,
    INSTRUCTIONS_BENCHMARK,
    KERNELS_BENCHMARK,
    QUANT_BENCHMARK,
    CompilerMetric,
    InstructionMetric,
    KernelMetric,
    QuantMetric,
)

HIGHER, LOWER = "higher", "lower"

# (benchmark, metric) -> direction; benchmark "" means any benchmark.
TABLE: dict[tuple[str, str], str] = {
    **{(QUANT_BENCHMARK, m): HIGHER for m in (
        QuantMetric.SPEEDUP, QuantMetric.EAGER_SPEEDUP, QuantMetric.COMPILED_SPEEDUP,
        QuantMetric.TFLOPS, QuantMetric.GBPS, QuantMetric.SQNR)},
    **{(QUANT_BENCHMARK, m): LOWER for m in (
        QuantMetric.BASELINE_TIME, QuantMetric.QUANTIZED_TIME, QuantMetric.MEMORY,
        QuantMetric.BASELINE_EAGER_TIME, QuantMetric.QUANTIZED_EAGER_TIME)},
    (KERNELS_BENCHMARK, KernelMetric.LATENCY): LOWER,
    (KERNELS_BENCHMARK, KernelMetric.BANDWIDTH): HIGHER,
    (KERNELS_BENCHMARK, KernelMetric.SPEEDUP): HIGHER,
    (COMPILERS_BENCHMARK, CompilerMetric.SPEEDUP): HIGHER,
    (COMPILERS_BENCHMARK, CompilerMetric.LATENCY): LOWER,
    (COMPILERS_BENCHMARK, CompilerMetric.COMPILE_TIME): LOWER,
    (COMPILERS_BENCHMARK, CompilerMetric.COMPRESSION): HIGHER,
    (COMPILERS_BENCHMARK, CompilerMetric.MEMORY): LOWER,
    (COMPILERS_BENCHMARK, CompilerMetric.GRAPH_BREAKS): LOWER,
    (INSTRUCTIONS_BENCHMARK, InstructionMetric.COUNT): LOWER,
    (INSTRUCTIONS_BENCHMARK, InstructionMetric.WALL_TIME): LOWER,
    # Other writers' metrics, as the HUD's dashboards read them (vLLM, TorchAO LLM, ...).
    ("", "speedup"): HIGHER,
    ("", "passrate"): HIGHER,
    ("", "compilation_latency"): LOWER,
    ("", "compression_ratio"): HIGHER,
    ("", "abs_latency"): LOWER,
    ("", "median_ttft_ms"): LOWER,
    ("", "median_tpot_ms"): LOWER,
    ("", "median_itl_ms"): LOWER,
    ("", "median_e2el_ms"): LOWER,
    ("", "latency"): LOWER,
    ("", "requests_per_second"): HIGHER,
    ("", "tokens_per_second"): HIGHER,
    ("", "token_per_sec"): HIGHER,
    ("", "throughput"): HIGHER,
    ("", "memory_bandwidth"): HIGHER,
    ("", "flops_utilization"): HIGHER,
}

# Inference for metrics in no table, first match wins. Deliberately narrow: a word that
# does not say which way is better ("count", "size", "memory" of a budget...) stays unknown
# rather than guessed.
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (HIGHER, re.compile(r"speedup|throughput|tflop|gflop|gb/s|tok(en)?s?/s|per.?sec|/s\b"
                        r"|pass.?rate|accuracy|sqnr|bandwidth|\bqps\b|\(x\)", re.I)),
    (LOWER, re.compile(r"time|latency|\bms\b|\bus\b|\bsec(onds)?\b|\(s\)|memory|\bmb\b"
                       r"|instructions?|ttft|\bitl\b|tpot|e2el|duration|overhead", re.I)),
)


@dataclass(frozen=True)
class Direction:
    better: str | None  # HIGHER, LOWER or None (unknown: a change is reported, not judged)
    rule: str  # why: "table: <benchmark> / <metric>", "inferred: '<word>' in ...", "unknown"


def direction(metric: str, benchmark: str = "", unit: str = "") -> Direction:
    """Which way is better for `metric` (of `benchmark`, measured in `unit`), and why."""
    for key in ((benchmark, metric), ("", metric)):
        if key in TABLE:
            where = f"{key[0]} / {metric}" if key[0] else metric
            return Direction(TABLE[key], f"table: {where}")
    text = f"{metric} {unit}"
    for better, pattern in _RULES:
        found = pattern.search(text)
        if found:
            return Direction(better, f"inferred: {found.group(0)!r} in {text.strip()!r}")
    return Direction(None, "unknown: no table entry and no telling word in the name or unit")
