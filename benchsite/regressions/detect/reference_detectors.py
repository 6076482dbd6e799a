"""Two simple rules the change-point detector is measured against.

- Conbench's lookback z-score: each point (its best repetition) against the mean and
  standard deviation of the previous 100 points, after dropping those beyond 10 x IQR;
  flagged when |z| > 5.
- Codespeed-style "previous point": flagged when a point is more than 5 % from the previous.

Both flag points; a run of flags at most 5 points apart is one alert (see
`windows.merge_flags`), located at its first flag and raised then.
"""

from __future__ import annotations

import numpy as np

from benchsite.comparison.quantiles import row_quantiles
from benchsite.regressions.detect import Detection
from benchsite.regressions.detect.windows import merge_flags, trailing


def zscore(best: np.ndarray, lookback: int = 100, threshold: float = 5.0,
           iqr_factor: float = 10.0, min_history: int = 10) -> list[Detection]:
    """`best`: one value per point (its best repetition); NaN points are skipped."""
    best = np.asarray(best, dtype=float)
    kept = np.flatnonzero(np.isfinite(best))
    x = best[kept]
    history = trailing(x, lookback)[: len(x)]
    q1, count = row_quantiles(history, 0.25)
    q3, _ = row_quantiles(history, 0.75)
    spread = iqr_factor * (q3 - q1)
    with np.errstate(invalid="ignore"):
        inside = (history >= (q1 - spread)[:, None]) & (history <= (q3 + spread)[:, None])
    used = np.where(inside, history, np.nan)
    n_used = inside.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nansum(used, axis=1) / n_used
        std = np.sqrt(np.nansum((used - mean[:, None]) ** 2, axis=1) / (n_used - 1))
        z = (x - mean) / std
        flags = (count >= min_history) & (np.abs(z) > threshold)
    return _alerts(x, kept, flags, lambda first: mean[first])


def previous_point(values: np.ndarray, threshold: float = 0.05) -> list[Detection]:
    """`values`: one value per point; NaN points are skipped."""
    values = np.asarray(values, dtype=float)
    kept = np.flatnonzero(np.isfinite(values))
    x = values[kept]
    flags = np.zeros(len(x), dtype=bool)
    with np.errstate(invalid="ignore", divide="ignore"):
        flags[1:] = np.abs(x[1:] / x[:-1] - 1) > threshold
    return _alerts(x, kept, flags, lambda first: x[first - 1])


def _alerts(x: np.ndarray, kept: np.ndarray, flags: np.ndarray, baseline) -> list[Detection]:
    return [Detection(index=int(kept[first]), detected_at=int(kept[first]),
                      before=float(baseline(first)), after=float(x[first]),
                      confidence=float("nan"))
            for first, _last in merge_flags(flags)]
