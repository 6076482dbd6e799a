"""Byte counts behind the bandwidth figures, worked out by hand for M=4, N=8."""

import pytest

from runner.kernels.definitions import KERNELS, bytes_moved

M, N = 4, 8


@pytest.mark.parametrize(("kernel", "direction", "dtype", "expected"), [
    # read x, read int64 target, write loss
    ("cross_entropy", "forward", "bfloat16", M * N * 2 + M * 8 + M * 2),
    # read dloss, read x, read target, write dx
    ("cross_entropy", "backward", "bfloat16", M * 2 + M * N * 2 + M * 8 + M * N * 2),
    ("softmax", "forward", "float32", 2 * M * N * 4),  # read x, write y
    ("softmax", "backward", "float32", 3 * M * N * 4),  # read dy and y, write dx
    ("rms_norm", "forward", "float16", 2 * M * N * 2 + N * 2),  # read x and w, write y
    # read dy, x and w, write dx and dw
    ("rms_norm", "backward", "float16", 3 * M * N * 2 + 2 * N * 2),
    ("layer_norm", "forward", "bfloat16", 2 * M * N * 2 + N * 2),
    ("layer_norm", "backward", "float32", 3 * M * N * 4 + 2 * N * 4),
])
def test_bytes_moved(kernel, direction, dtype, expected):
    assert bytes_moved(kernel, direction, M, N, dtype) == expected


def test_formulas_read_as_the_traffic_they_count():
    assert KERNELS["softmax"].formula("backward") == (
        "read dy (M*N*s) + read y (M*N*s) + write dx (M*N*s)")
    assert KERNELS["cross_entropy"].formula("forward") == (
        "read x (M*N*s) + read target (M*8) + write loss (M*s)")
    with pytest.raises(ValueError, match="direction 'sideways'"):
        KERNELS["softmax"].bytes_moved("sideways", M, N, 2)
