"""Each family's series names: benchmark.name, model naming and metric names.

Dashboards, the demo data and the catalog import these; the families' record writers build
records with them. The benchmark names are the ones other tools read: "micro-benchmark api"
is torchao's, "TorchInductor" the PyTorch HUD compilers dashboard's.
"""

from __future__ import annotations

import re
from enum import StrEnum

# Quantization microbenchmarks (runner.quant): torchao's CI format.
QUANT_BENCHMARK = "micro-benchmark api"
QUANT_MODEL_TYPE = "micro-benchmark custom layer"
QUANT_ORIGINS = ("torchao",)
# The recipe that leaves the model in high precision: its speedup is the run's A/A sanity check
QUANT_BASELINE_RECIPE = "baseline"


class QuantMetric(StrEnum):
    SPEEDUP = "Fwd Speedup (x)"  # compiled over compiled when the cell compiles, else eager
    BASELINE_TIME = "Bfloat16 Fwd Time (ms)"
    QUANTIZED_TIME = "Quantized Fwd Time (ms)"
    MEMORY = "Allocated Memory (MB)"
    EAGER_SPEEDUP = "Eager Speedup (x)"
    COMPILED_SPEEDUP = "Compiled Speedup (x)"
    BASELINE_EAGER_TIME = "Bfloat16 Eager Fwd Time (ms)"
    QUANTIZED_EAGER_TIME = "Quantized Eager Fwd Time (ms)"
    TFLOPS = "Quantized TFLOP/s"
    GBPS = "Quantized GB/s"
    SQNR = "SQNR (dB)"


def quant_model_name(recipe: str, shape: str) -> str:
    """torchao's model.name of a cell: "<recipe>-<M>-<K>-<N>" (shape as "M-K-N")."""
    return f"{recipe}-{shape}"


_MKN = re.compile(r"(\d+-\d+-\d+)$")


def quant_shape(model: str, recipe: str) -> str:
    """The "M-K-N" shape of a quantization model name (`quant_model_name`'s inverse); for a
    name that does not end in one (other writers), the name without the recipe."""
    found = _MKN.search(model)
    return found.group(1) if found else model.removeprefix(f"{recipe}-")


# Fused-kernel layers (runner.kernels): model.name is the kernel, model.backend the backend,
# benchmark.mode the direction ("forward" / "backward").
KERNELS_BENCHMARK = "fused kernels"
KERNELS_MODEL_TYPE = "fused kernel"
KERNELS_ORIGINS = ("kernels",)
KERNEL_DIRECTIONS = ("forward", "backward")


class KernelMetric(StrEnum):
    LATENCY = "latency"
    BANDWIDTH = "memory_bandwidth"
    SPEEDUP = "speedup"  # over eager
    ACCURACY = "accuracy"  # "pass" / "fail_accuracy", a string result


# The compilers experiment matrix (runner.compilers): records shaped like the HUD's
# TorchInductor records, whatever the backend, so its compilers dashboard reads ours.
COMPILERS_BENCHMARK = "TorchInductor"
COMPILERS_MODES = {"eval": "inference", "train": "training"}


class CompilerMetric(StrEnum):
    SPEEDUP = "speedup"
    LATENCY = "abs_latency"
    COMPILE_TIME = "compilation_latency"
    COMPRESSION = "compression_ratio"
    MEMORY = "peak_memory"
    GRAPH_BREAKS = "graph_breaks"
    ACCURACY = "accuracy"  # the HUD's strings: "pass", "fail_accuracy", ...


# Instruction counts (runner.instructions): callgrind counts per call.
INSTRUCTIONS_BENCHMARK = "instruction counts"
INSTRUCTIONS_ORIGINS = ("pytorch",)


class InstructionMetric(StrEnum):
    COUNT = "instruction_count"
    WALL_TIME = "wall_time"
