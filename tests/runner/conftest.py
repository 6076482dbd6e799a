"""Helpers for the runner's tests: tiny CPU cells and timing settings that finish in ms."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from runner.engine.timing_data import TimingSettings
from runner.quant.cells import QuantCell
from runner.quant.shapes import Shape

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "specs"
FAST = TimingSettings(samples=3, warmup_s=0.0, min_sample_s=0.0005, min_pairs=6, max_pairs=12,
                      budget_s=0.05)


def measured(printed: str, skipped: int) -> int:
    """The cells a run's closing counts ("2 ok, 2 skipped, 1 unstable") say were measured,
    after checking its skipped count and that none failed: "ok", or "unstable" where a busy
    machine widened an interval beyond its target (CI runs suites side by side)."""
    line = next(line for line in reversed(printed.splitlines())
                if re.fullmatch(r"\d+ [a-z]+(, \d+ [a-z]+)*", line.strip()))
    counts = {name: int(n) for n, name in (part.split(" ") for part in line.strip().split(", "))}
    assert counts.pop("skipped", 0) == skipped and set(counts) <= {"ok", "unstable"}, line
    return sum(counts.values())


def series_names(records: list[dict[str, Any]]) -> set[str]:
    """What tells a record's series from another's: all of it but the metric's values (the
    server derives its series from these fields)."""
    return {json.dumps([r["benchmark"], r["model"], r["metric"]["name"]], sort_keys=True)
            for r in records}


@pytest.fixture
def make_cell(tmp_path):
    def make(quantization: str = "int8wo", **overrides) -> QuantCell:
        values = {
            "name": "test",
            "quantization": quantization,
            "sparsity": None,
            "shape": Shape("custom", 32, 64, 128),
            "model_type": "linear",
            "dtype": "bfloat16",
            "device": "cpu",
            "compile_mode": None,
            "output_dir": str(tmp_path / "inference"),
        }
        values.update(overrides)
        return QuantCell(**values)

    return make
