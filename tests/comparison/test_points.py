"""Point values and noise floors of many series at once are each series' own."""

import numpy as np

from benchsite.comparison import points


def test_many_series_at_once_summarise_as_each_alone():
    generator = np.random.default_rng(5)
    series = []
    for length, width in ((0, 3), (1, 3), (4, 1), (7, 4), (30, 5), (2, 2), (11, 6), (9, 3)):
        matrix = generator.lognormal(0, 0.05, (length, width))
        matrix[generator.random(matrix.shape) < 0.2] = np.nan  # ragged: fewer repetitions
        matrix[generator.random(matrix.shape) < 0.05] = -1.0  # unusable
        series.append(matrix)
    width = max(matrix.shape[1] for matrix in series)
    stacked = np.vstack([np.pad(m, ((0, 0), (0, width - m.shape[1])), constant_values=np.nan)
                         for m in series])
    values, floors = points.summarize_segments(stacked, np.array([len(m) for m in series]))
    start = 0
    for matrix, floor in zip(series, floors, strict=True):
        alone_values, alone_floor = points.summarize(matrix)
        np.testing.assert_array_equal(values[start : start + len(matrix)], alone_values)
        assert floor == alone_floor
        start += len(matrix)
    assert floors[0] == points.MIN_NOISE  # no points: the smallest noise
    assert len({float(f) for f in floors}) > 3  # the series' own floors, not one
