import pytest

from benchsite.results.direction import HIGHER, LOWER, infer


@pytest.mark.parametrize(("metric", "unit", "expected"), [
    ("Fwd Speedup (x)", "x", HIGHER), ("speedup", "", HIGHER), ("Quantized GB/s", "", HIGHER),
    ("Quantized TFLOP/s", "", HIGHER), ("SQNR (dB)", "dB", HIGHER), ("passrate", "", HIGHER),
    ("compression_ratio", "", HIGHER), ("output tokens/s", "", HIGHER),
    ("Bfloat16 Fwd Time (ms)", "ms", LOWER), ("median_itl_ms", "", LOWER),
    ("Allocated Memory (MB)", "MB", LOWER), ("compilation_latency", "", LOWER),
    ("instruction count", "", LOWER), ("status", "", None),
])
def test_direction_is_inferred_from_name_and_unit(metric, unit, expected):
    assert infer(metric, unit) == expected
