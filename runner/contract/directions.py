"""Which way is better for a metric.

First an explicit table (our families' metrics, which each family declares and
runner.families.register adds with `declare`, and the other writers' metrics the HUD
knows), then, for a metric in neither, inference from its name and unit. Each answer says
which rule gave it, so the admin can show why a metric is judged the way it is; an
administrator's override (comparison.MetricDirection, through benchsite.comparison.directions)
comes before both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

HIGHER, LOWER = "higher", "lower"

# (benchmark, metric) -> direction; benchmark "" means any benchmark. Our families' metrics
# are not listed here: each family declares its own (`DIRECTIONS` of its runner.families
# module, for its `BENCHMARK`), added by runner.families.register through `declare`.
TABLE: dict[tuple[str, str], str] = {
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


def declare(benchmark: str, directions: Mapping[str, str]) -> None:
    """Add a family's table: which way is better for each metric of its `benchmark`.
    ValueError when a metric is neither HIGHER nor LOWER, or is already declared the other way
    (nothing is added then)."""
    if not benchmark:
        raise ValueError("a family's directions need its benchmark name")
    for metric, better in directions.items():
        if better not in (HIGHER, LOWER):
            raise ValueError(f"{benchmark} / {metric}: {better!r} is neither {HIGHER!r} "
                             f"nor {LOWER!r}")
        known = TABLE.get((benchmark, str(metric)))
        if known not in (None, better):
            raise ValueError(f"{benchmark} / {metric}: already declared {known!r}")
    TABLE.update({(benchmark, str(metric)): better for metric, better in directions.items()})


def withdraw(benchmark: str, directions: Mapping[str, str]) -> None:
    """Take back what `declare` added (runner.families.unregister)."""
    for metric in directions:
        TABLE.pop((benchmark, str(metric)), None)


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
