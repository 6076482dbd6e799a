"""Helpers for the runner's tests: tiny CPU cells and timing settings that finish in ms."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.quant.cells import Cell, TimingSettings
from runner.quant.shapes import Shape

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "specs"
FAST = TimingSettings(samples=3, warmup_s=0.0, min_sample_s=0.0005)
RUN_METADATA = {"repo": "pytorch/ao", "head_branch": "main", "head_sha": "abc123"}


@pytest.fixture
def make_cell(tmp_path):
    def make(quantization: str = "int8wo", **overrides) -> Cell:
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
        return Cell(**values)

    return make
