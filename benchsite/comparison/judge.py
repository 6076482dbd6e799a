"""Judging a series' change between two commits against the series' own history.

A series changed between a base and a head commit when all of these hold:

- the change is past the metric's tolerance (the head against the series' level: the
  median of its last points on the default branch up to the base commit, which is steadier
  than the base's single point);
- it is significant against the series' noise: the standard deviation of the history's
  point-to-point log differences gives the noise of one point (clipped at 3 MADs; the
  level is the median of the points since the series' latest recorded change, so an old
  level is not the reference), and the head's distance
  from the level in those units gives a p-value; across one comparison's series these are
  held to a false discovery rate (Benjamini-Hochberg, `control`), so comparing 700 series
  does not raise the handful a 3-sigma rule would raise by chance;
- where both commits have 4+ repetitions, a Mann-Whitney U test of them agrees;
- where the base itself is already off the level (by 3+ noise units) with the head on the
  same side, the series moved at or before the base (a change detection has not recorded
  yet): the base is then the level, so the change is the head's own;
- neither commit's measurement was marked unstable by the runner.

Without enough history, 4+ repetitions on both sides decide alone (Mann-Whitney); with
neither, a change past the tolerance is "insufficient data". A value going to or from 0 (a
failed run, as the HUD records one) is a change whatever the noise, and a pass/fail series
(accuracy) changes when a pass becomes a failure or back (`outcome`); a benchmark cell that
fails at the head and not at the base is a regression (`cell_status`). Each verdict says
which rule decided.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

import numpy as np
from scipy import special, stats

from benchsite.comparison.better import HIGHER
from benchsite.comparison.points import MIN_NOISE
from benchsite.comparison.quantiles import nan_medians
from runner.contract.status import FAILED

REGRESSION, IMPROVEMENT, CHANGED = "regression", "improvement", "changed"
UNCHANGED, NOISY, INSUFFICIENT = "unchanged", "noisy", "insufficient_data"
NEW, MISSING = "new", "missing"
# Report order: what needs attention first.
STATES = (REGRESSION, IMPROVEMENT, CHANGED, NOISY, INSUFFICIENT, NEW, MISSING, UNCHANGED)
MIN_REPETITIONS = 4  # per side, for the Mann-Whitney test (LNT's rule)
MAD_SCALE = 1.4826
MOVED_Z = 3.0  # noise units the base may be off the level before it is the level
CLIP = 3.0  # successive differences are clipped at this many scaled MADs for the noise
EFFICIENCY = 0.9  # a clipped standard deviation is worth this share of a plain one
MAX_FDR = 0.25  # the largest false discovery rate a comparison may be held to
UNSTABLE = "the runner marked a measurement of it unstable"


@dataclass(frozen=True)
class Rules:
    tolerance: float  # relative change a metric may make (its threshold)
    min_history: int = 5  # history points needed to know the noise
    # False discovery rate over one comparison's series (Benjamini-Hochberg); the default of
    # `DetectionSettings.compare_fdr`, which a request (`?fdr=`, the gate's --fdr) overrides.
    fdr: float = 0.005
    alpha: float = 0.05  # Mann-Whitney level, with 4+ repetitions a side


# Verdicts, baselines and rows are made by the ten thousand per comparison: slotted and
# not frozen, since a frozen dataclass's __init__ sets each field through
# object.__setattr__ (a Verdict 1.45 us against 0.27 us; 18,800 series a comparison).
@dataclass(slots=True)
class Verdict:
    state: str
    rule: str  # which rule decided, in words
    level: float | None = None  # the history's level up to the base
    noise: float | None = None  # relative noise of one point (history), None: unknown
    p_value: float | None = None  # of the head against the level, in noise units
    mw_p_value: float | None = None  # Mann-Whitney U over repetitions
    # `control`: the p-value adjusted over the comparison's series (Benjamini-Hochberg), and
    # for a change it held back as noisy, the state it would have had.
    adjusted: float | None = None
    held: str = ""


@dataclass(slots=True)
class Baseline:
    """What a series' history up to a commit says: its level (the median of the points
    since its latest recorded change; None without any), the relative noise of one point
    and its degrees of freedom (None/0 with under 3 points), and how many usable points
    it has and the level is from. Stored per default-branch point (`SeriesBaseline`) so
    that a comparison need not read the history again."""

    level: float | None
    noise: float | None
    freedom: float
    points: int
    since: int


def baseline(history: np.ndarray, level_from: int = 0) -> Baseline:
    """The baseline of point values (oldest first); the level from `history[level_from:]`
    (the points since the series' latest recorded change), the noise from all of it."""
    return baselines(np.asarray(history, dtype=float)[None, :], np.array([level_from]))[0]


def baselines(windows: np.ndarray, level_from: np.ndarray) -> list[Baseline]:
    """`baseline` of each row of `windows` (point values, oldest first, NaN for none), the
    level from column `level_from[row]` on: one pass for thousands of points."""
    usable = np.isfinite(windows) & (windows > 0)
    values = np.where(usable, windows, np.nan)
    columns = np.arange(windows.shape[1])[None, :]
    level, since = nan_medians(np.where(columns >= level_from[:, None], values, np.nan))
    # The noise is that of successive usable points: move them to the front, in order.
    compact = np.take_along_axis(values, np.argsort(~usable, axis=1, kind="stable"), axis=1)
    points = usable.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        steps = np.diff(np.log(compact), axis=1)
        centre, count = nan_medians(steps)
        mad = MAD_SCALE * nan_medians(np.abs(steps - centre[:, None]))[0]
        clipped = np.clip(steps, (centre - CLIP * mad)[:, None], (centre + CLIP * mad)[:, None])
        spread = np.sqrt(np.nansum((clipped - centre[:, None]) ** 2, axis=1) / (count - 1))
    noise = np.maximum(spread / math.sqrt(2), MIN_NOISE)
    return [Baseline(float(level[n]) if since[n] else None,
                     float(noise[n]) if points[n] >= 3 else None,
                     EFFICIENCY * float(count[n] - 1) if points[n] >= 3 else 0.0,
                     int(points[n]), int(since[n]))
            for n in range(len(windows))]


NO_HISTORY = Baseline(None, None, 0.0, 0, 0)


def judge(base: Sequence[float], head: Sequence[float], history: Baseline,
          direction: str | None, rules: Rules, unstable: bool = False,
          head_runs: int = 1) -> Verdict:
    """A first verdict on one series (`control` then holds a comparison's significant
    verdicts to its false discovery rate). `base`/`head`: the commits' repetitions;
    `history`: the series' baseline up to the base commit on the default branch;
    `head_runs`: how many runs the head's repetitions come from (each run's noise is a
    history point's, so k runs at the head know its value sqrt(k) times better: re-running
    a commit confirms or clears a change a single run leaves within the noise)."""
    if not base:
        return Verdict(NEW, "no result at the base commit")
    if not head:
        return Verdict(MISSING, "no result at the head commit")
    base_value, head_value = float(median(base)), float(median(head))
    if (base_value == 0) != (head_value == 0):
        # A failed run reports 0 (the HUD's convention for a model that fails): to or from
        # 0 is no move within any noise, and a log scale cannot weigh it.
        return Verdict(_state(head_value, base_value, direction),
                       f"{base_value:.4g} -> {head_value:.4g}: "
                       f"{'to' if head_value == 0 else 'from'} 0 (a failed run reports 0)")
    enough = (history.points >= rules.min_history and history.noise is not None
              and base_value > 0 and head_value > 0)
    if not enough:
        return _without_history(base, head, history.points, direction, rules, unstable)
    noise, since = history.noise, history.since
    level = history.level if since else base_value
    # The level is a median of points since the latest change (the base alone, if none):
    # its own error adds to the head's.
    runs = max(1, head_runs)
    level_error = math.pi / (2 * since) if since > 1 else 1
    spread = noise * math.sqrt(1 / runs + level_error)
    moved = ""
    # (The base is one run: its distance from the level is in one run's noise units.)
    if (abs(math.log(base_value / level)) > MOVED_Z * noise * math.sqrt(1 + level_error)
            and (base_value > level) == (head_value > level)):
        # The base is already off the level, the head on the same side: the series moved
        # at or before the base (a change not recorded yet), so the base is the level.
        level, spread = base_value, noise * math.sqrt(1 + 1 / runs)
        moved = " (the series moved at or before the base commit: judged from the base)"
    change = head_value / level - 1
    z = abs(math.log(head_value / level)) / spread
    # Every series judged on its history is one of the comparison's tests, within the
    # tolerance or not (`control`).
    p = float(2 * special.stdtr(history.freedom, -z))  # Student's t, two-sided
    if abs(change) <= rules.tolerance:
        return Verdict(UNCHANGED, f"within the ±{rules.tolerance:.0%} tolerance{moved}",
                       level, noise, p)
    mw = _mann_whitney(base, head)  # (only here: most series are within the tolerance)
    if unstable:
        return Verdict(NOISY, UNSTABLE, level, noise, p, mw)
    over = f" over {runs} runs" if runs > 1 else ""
    described = (f"{change:+.1%} from the level, {z:.1f}x its noise ({noise:.1%}){over}"
                 f"{moved}")
    if mw is not None and mw >= rules.alpha:
        return Verdict(NOISY, f"{described}, but Mann-Whitney p={mw:.2g} over the "
                       "repetitions", level, noise, p, mw)
    return Verdict(_state(head_value, level, direction), described, level, noise, p, mw)


def outcome(base: Sequence[tuple[str, bool | None]],
            head: Sequence[tuple[str, bool | None]]) -> Verdict:
    """A pass/fail series (a model's accuracy check): each side's results as (text, passes:
    None for neither). A pass at the base (every result) that fails at the head (any) is a
    regression, the reverse an improvement: a failure is no matter of noise."""
    if not base:
        return Verdict(NEW, "no result at the base commit")
    if not head:
        return Verdict(MISSING, "no result at the head commit")
    said = f"{_texts(base)} -> {_texts(head)}"
    was = [passed for _, passed in base if passed is not None]
    now = [passed for _, passed in head if passed is not None]
    if not was or not now:
        return Verdict(UNCHANGED, f"{said}: neither a pass nor a failure at the "
                       f"{'base' if not was else 'head'}")
    if all(was) != all(now):
        return Verdict(REGRESSION if all(was) else IMPROVEMENT,
                       f"{said}: a {'pass' if all(was) else 'failure'} became a "
                       f"{'failure' if all(was) else 'pass'}")
    return Verdict(UNCHANGED, f"{said}: a {'pass' if all(now) else 'failure'} at both")


def cell_status(base: Sequence[tuple[str, str]], head: Sequence[tuple[str, str]]) -> Verdict:
    """A cell's "status" series: each side's (status, error or reason). The runner records
    one only for a cell it skipped or that failed (a cell that ran has its metrics), so a
    failure at the head where the base has none is a regression: the cell's metrics are
    then only missing, which alone fails no gate."""
    errors = [detail for status, detail in head if status == FAILED]
    failed_before = any(status == FAILED for status, _ in base)
    if errors and not failed_before:
        error = (errors[0] or "no error recorded").strip().splitlines()[-1][:200]
        return Verdict(REGRESSION, f"the cell failed at the head, not at the base: {error}")
    if errors:
        return Verdict(UNCHANGED, "the cell failed at both commits")
    if not base:
        return Verdict(NEW, f"{_texts(head)} at the head")
    if not head:
        return Verdict(MISSING, f"{_texts(base)} at the base, no status at the head (the "
                       "cell ran there, or was not run: its metrics say which)")
    return Verdict(UNCHANGED, f"{_texts(base)} -> {_texts(head)}")


def _texts(results: Sequence[tuple[str, object]]) -> str:
    """The distinct texts of a side's results."""
    return "/".join(sorted({text or "(empty)" for text, _ in results}))


def _without_history(base_reps: Sequence[float], head_reps: Sequence[float], points: int,
                     direction: str | None, rules: Rules, unstable: bool) -> Verdict:
    """Too little history for its noise: the repetitions decide, where there are enough."""
    base, head = float(median(base_reps)), float(median(head_reps))
    change = head / base - 1 if base else 0.0  # (0 at both: `judge` takes one 0 alone)
    if abs(change) <= rules.tolerance:
        return Verdict(UNCHANGED, f"within the ±{rules.tolerance:.0%} tolerance of the base")
    if unstable:
        return Verdict(NOISY, UNSTABLE)
    mw = _mann_whitney(base_reps, head_reps)
    if mw is None:
        return Verdict(INSUFFICIENT, f"{points} history points (needs {rules.min_history}) "
                       f"and fewer than {MIN_REPETITIONS} repetitions a side")
    described = f"Mann-Whitney p={mw:.2g} over the repetitions (no history)"
    if mw >= rules.alpha:
        return Verdict(NOISY, described, mw_p_value=mw)
    return Verdict(_state(head, base, direction), described, mw_p_value=mw)


def check_fdr(fdr: float) -> float:
    """`fdr` if it is a usable false discovery rate (0 < q <= MAX_FDR); else ValueError."""
    if not 0 < fdr <= MAX_FDR:  # NaN fails too
        raise ValueError(f"a false discovery rate must be above 0 and at most {MAX_FDR:g}; "
                         f"got {fdr:g}")
    return fdr


def control(verdicts: list[Verdict], fdr: float) -> list[Verdict]:
    """The verdicts with those judged on the history's noise held to a false discovery rate
    over all of them (Benjamini-Hochberg): a change that is not among the discoveries is
    "noisy"."""
    tested = [number for number, verdict in enumerate(verdicts)
              if verdict.p_value is not None]
    if not tested:
        return verdicts
    adjusted = stats.false_discovery_control([verdicts[n].p_value for n in tested])
    held = list(verdicts)
    for number, q in zip(tested, adjusted, strict=True):
        # (Verdict(...) rather than dataclasses.replace: 18,000 series took 0.2 s in replace)
        v = held[number]
        state, rule, was = v.state, v.rule, v.held
        if state in (REGRESSION, IMPROVEMENT, CHANGED) and q > fdr:
            state, was, rule = NOISY, state, (f"{rule}: within the noise of {len(tested)} "
                                              f"series compared (adjusted p={q:.2g}, needs "
                                              f"{fdr:g})")
        held[number] = Verdict(state, rule, v.level, v.noise, v.p_value, v.mw_p_value,
                               float(q), was)
    return held


def _state(head: float, level: float, direction: str | None) -> str:
    if direction is None:
        return CHANGED
    return IMPROVEMENT if (head > level) == (direction == HIGHER) else REGRESSION


def _mann_whitney(base: Sequence[float], head: Sequence[float]) -> float | None:
    if min(len(base), len(head)) < MIN_REPETITIONS:
        return None
    p = float(stats.mannwhitneyu(base, head, alternative="two-sided").pvalue)
    return None if math.isnan(p) else p
