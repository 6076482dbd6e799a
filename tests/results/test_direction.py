"""Which way is better for a metric: the contract's table first, inference only for metrics
the table does not know, and unknown rather than a guess."""

import pytest

from runner.contract.directions import HIGHER, LOWER, Direction, direction
from runner.contract.names import INSTRUCTIONS_BENCHMARK, QUANT_BENCHMARK, InstructionMetric


@pytest.mark.parametrize(("metric", "benchmark", "better"), [
    ("Fwd Speedup (x)", QUANT_BENCHMARK, HIGHER),
    (InstructionMetric.COUNT, INSTRUCTIONS_BENCHMARK, LOWER),
    ("passrate", "", HIGHER), ("compilation_latency", "any benchmark", LOWER),
    ("median_ttft_ms", "", LOWER), ("tokens_per_second", "", HIGHER),
])
def test_a_metric_in_the_table_is_judged_by_the_table(metric, benchmark, better):
    found = direction(metric, benchmark)
    assert found.better == better and found.rule.startswith("table: ")


@pytest.mark.parametrize(("metric", "unit", "better"), [
    ("foo_latency_ms", "", LOWER), ("Quantized GB/s", "", HIGHER),
    ("Quantized TFLOP/s", "", HIGHER), ("SQNR (dB)", "dB", HIGHER),
    ("output tokens/s", "", HIGHER), ("my throughput", "", HIGHER),
    ("Bfloat16 Fwd Time (ms)", "ms", LOWER), ("Allocated Memory (MB)", "MB", LOWER),
    ("step", "ms", LOWER),
])
def test_a_metric_outside_the_table_is_inferred_from_its_name_and_unit(metric, unit, better):
    found = direction(metric, "someone else's benchmark", unit)
    assert found.better == better and found.rule.startswith("inferred: ")


@pytest.mark.parametrize("metric", ["batch_size", "token count", "status", "widgets"])
def test_a_name_that_does_not_say_which_way_is_better_stays_unknown(metric):
    found = direction(metric, "someone else's benchmark")
    assert found.better is None and found.rule.startswith("unknown")


def test_the_table_answers_where_the_name_alone_would_not():
    assert direction("compression_ratio") == Direction(HIGHER, "table: compression_ratio")
    assert direction("my_compression_ratio").better is None
