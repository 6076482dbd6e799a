"""Which way is better for a metric: inferred from its name and unit.

Speedups, throughputs, bandwidths, pass rates and accuracy scores are better higher; times,
latencies, memory and instruction counts are better lower. None when it cannot be told.
"""

from __future__ import annotations

import re

HIGHER, LOWER = "higher", "lower"

_HIGHER = re.compile(
    r"speedup|throughput|tflop|gflop|flops|gb/s|tok(en)?s?/s|/s\b|per.?sec|passrate|pass.?rate"
    r"|accuracy|sqnr|bandwidth|\bqps\b|compression|hit.?rate|score|\(x\)",
    re.IGNORECASE,
)
_LOWER = re.compile(
    r"time|latency|\bms\b|\bus\b|\bsec(onds)?\b|\(s\)|memory|\bmb\b|\bgb\b|\bbytes?\b|"
    r"instructions?|count|ttft|itl|tpot|e2el|duration|overhead|size",
    re.IGNORECASE,
)


def infer(metric: str, unit: str = "") -> str | None:
    text = f"{metric} {unit}"
    if _HIGHER.search(text):
        return HIGHER
    if _LOWER.search(text):
        return LOWER
    return None
