"""False alarms of the commit-comparison gate on quiet commits, against the fixed 5 % rule.

    .venv/bin/python perf/gate_noise.py [--series 2000] [--seed 11] [--quick]

Synthetic nightly histories (one point a night for 120 nights, lower is better, a level
drawn at random per series) at 1 %, 2 % and 5 % noise, in two variants: one value a night
(the noise is that of the value), and 5 repetitions a night, whose run-to-run noise (shared
by a night's repetitions) is the noise named and whose within-run noise is a third of it.

Each series is judged the way `benchsite.regressions.compare` judges it, with the pure
functions it calls: `judge.judge(base repetitions, head repetitions,
judge.baseline(history), "lower", Rules(tolerance=0.05, min_history=5, alpha=0.05))`
where the history is the series' point
values (trimmed means of the repetitions, as `history.recent` gives them) on the default
branch up to and including the base commit, the last 60 (`lookback_points`), with no
recorded change (`level_from=0`); then `judge.control(verdicts, Rules.fdr)` over the 100
series of one comparison. The fixed rule flags a series whose head moved more than 5 % from
its base (medians of their repetitions).

- Quiet commits: consecutive nights with no step (base: a night, head: the next), 100
  series compared at once; --series series at 5 nights each. Per series: the share of
  series-comparisons flagged (regression, improvement or changed); per comparison: the
  share of comparisons of 100 series where the gate fails (a regression among them).
- 10 % steps (half up: a regression, half down: an improvement): base the night before the
  step, head its first night; found when judged in the right direction. The new rule
  holds a comparison's series to a false discovery rate, so its recall depends on how many
  of the 100 series compared moved: 1, 10 or 100 (the others quiet series of a quiet
  comparison).

What the fixed rule's recall on an isolated step costs: a per-series cutoff on the same
p-values, with no false discovery rate, set to find the isolated 10 % steps as often as the
fixed rule, and the share of quiet series and of quiet comparisons it flags (a third table;
no check).

Re-running the head commit: the same figures at the default rate when the head is RERUNS
(3) runs of one commit (three nights at its level), judged together (`judge.judge`'s
`head_runs`), in a fourth table (no check).

The trade-off of the false discovery rate (`DetectionSettings.compare_fdr`, a request's
`?fdr=`, the gate's --fdr): the same verdicts held to q = 0.005, 0.05 and 0.25 give the new
rule's FA, gate and recall figures per q, in a second table (no check).

The check (exit status 1 when it fails), at the default rate (`Rules.fdr`): at 2 % noise,
in both variants, the new rule's false-alarm rate per series is at most a tenth of the fixed
rule's, and its recall on 10 % steps is no lower than the fixed rule's (within one standard
error of the difference) with 10 of 100 series moving, and with 1 of 100. Pure functions:
no database. --quick: a fifth of the series (for tests).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchsite.regressions.detect import judge, points  # noqa: E402
from benchsite.regressions.detect.judge import (  # noqa: E402
    CHANGED,
    IMPROVEMENT,
    NOISY,
    REGRESSION,
    Rules,
)
from runner.contract.directions import LOWER  # noqa: E402

# DetectionSettings' defaults (checked by tests/regressions/test_perf_scripts.py) and the
# tolerance of times.
LOOKBACK = 60  # lookback_points
MIN_HISTORY = 5  # min_history
ALPHA = 0.05  # compare_significance
TOLERANCE = 0.05  # "*time*" threshold
RULES = Rules(tolerance=TOLERANCE, min_history=MIN_HISTORY, alpha=ALPHA)
FIXED = 0.05  # the fixed rule: |head / base - 1| > 5 %
NIGHTS = 120
PER_COMPARISON = 100
QUIET_NIGHTS = 5  # quiet comparisons per series
STEP = 0.10
NOISES = (0.01, 0.02, 0.05)
VARIANTS = (("1 value", 1), ("5 repetitions", 5))
WITHIN = 1 / 3  # within-run noise, as a share of the run-to-run noise
MOVING = (1, 10, 100)  # series of a comparison's 100 that step
CHECKED_NOISE, CHECKED_MOVING, RATIO = 0.02, (10, 1), 10
FLAGGED = (REGRESSION, IMPROVEMENT, CHANGED)
FDRS = (0.005, 0.05, 0.25)  # the trade-off table's rates
RERUNS = 3  # runs of the head commit in the re-run table
CONFIRM = 0.25  # the two-stage table's `gate --confirm` rate


def nights(rng: np.random.Generator, count: int, noise: float, repetitions: int,
           step_at: np.ndarray | None = None, step: np.ndarray | None = None) -> np.ndarray:
    """(series, nights, repetitions) of positive values."""
    level = np.exp(rng.uniform(np.log(0.05), np.log(500), count))[:, None]
    if step_at is not None:
        level = level * np.where(np.arange(NIGHTS)[None, :] >= step_at[:, None],
                                 1 + step[:, None], 1.0)
    else:
        level = np.broadcast_to(level, (count, NIGHTS))
    shared = rng.normal(0, noise, (count, NIGHTS, 1))
    own = rng.normal(0, noise * WITHIN, (count, NIGHTS, repetitions)) if repetitions > 1 \
        else np.zeros((count, NIGHTS, 1))
    return np.maximum(level[..., None] * (1 + shared) * (1 + own), 1e-9)


@dataclass
class Case:
    base: list[float]
    head: list[float]
    history: np.ndarray
    worse: bool | None  # the change to find: True a regression, False an improvement
    runs: int = 1  # runs the head's repetitions come from

    def fixed(self) -> str:
        change = float(np.median(self.head)) / float(np.median(self.base)) - 1
        if abs(change) <= FIXED:
            return judge.UNCHANGED
        return REGRESSION if change > 0 else IMPROVEMENT  # lower is better

    def judged(self) -> judge.Verdict:
        return judge.judge(self.base, self.head, judge.baseline(self.history), LOWER, RULES,
                           head_runs=self.runs)


def cases(matrix: np.ndarray, base_nights: np.ndarray, worse: list[bool | None],
          runs: int = 1) -> list[Case]:
    """Base: a night; head: the `runs` nights after it, as that many runs of one commit."""
    made = []
    for row, base, change in zip(matrix, base_nights, worse, strict=True):
        values, _ = points.summarize(row[max(0, base - LOOKBACK + 1) : base + 1])
        made.append(Case(row[base].tolist(), row[base + 1 : base + 1 + runs].ravel().tolist(),
                         values, change, runs))
    return made


@dataclass
class Held:
    """The new rule's figures at one false discovery rate."""

    fa: float
    gate: float
    recall: dict[int, float]


@dataclass
class Frontier:
    """A per-series p-value cutoff (no false discovery rate) that finds an isolated step as
    often as the fixed rule does, and what it costs on quiet series."""

    cutoff: float
    fa: float
    gate: float


@dataclass
class Figures:
    fixed_fa: float
    new_fa: float
    fixed_gate: float
    new_gate: float
    fixed_recall: float
    new_recall: dict[int, float]
    quiet: int
    comparisons: int
    steps: int
    by_fdr: dict[float, Held]  # the new rule's figures at each of `fdrs`
    frontier: Frontier


def measure(rng: np.random.Generator, series: int, noise: float, repetitions: int,
            fdrs: tuple[float, ...] = ()) -> Figures:
    """The figures at the default rate (`Rules.fdr`), and the new rule's at each of `fdrs`
    (the same verdicts, held to each rate)."""
    quiet = quiet_comparisons(rng, series, noise, repetitions)
    count = sum(map(len, quiet))
    fixed_fa = sum(case.fixed() in FLAGGED for c in quiet for case in c) / count
    fixed_gate = np.mean([any(case.fixed() == REGRESSION for case in c) for c in quiet])
    quiet_verdicts = [[case.judged() for case in comparison] for comparison in quiet]
    steps = step_cases(rng, series, noise, repetitions)
    step_verdicts = [case.judged() for case in steps]
    wanted = [REGRESSION if case.worse else IMPROVEMENT for case in steps]
    fixed_recall = np.mean([case.fixed() == want for case, want in zip(steps, wanted,
                                                                       strict=True)])
    default = held_to(quiet_verdicts, step_verdicts, wanted, RULES.fdr)
    return Figures(fixed_fa, default.fa, float(fixed_gate), default.gate, float(fixed_recall),
                   default.recall, count, len(quiet), series,
                   {fdr: default if fdr == RULES.fdr else
                    held_to(quiet_verdicts, step_verdicts, wanted, fdr) for fdr in fdrs},
                   frontier(quiet_verdicts, step_verdicts, wanted, float(fixed_recall)))


def quiet_comparisons(rng: np.random.Generator, series: int, noise: float, repetitions: int,
                      runs: int = 1) -> list[list[Case]]:
    """Every series compared at QUIET_NIGHTS bases (a night; the head: `runs` nights after
    it) with no step; the series of one base, 100 at a time, are one comparison."""
    matrix = nights(rng, series, noise, repetitions)
    comparisons: list[list[Case]] = []
    for base in rng.choice(np.arange(LOOKBACK, NIGHTS - runs), QUIET_NIGHTS, replace=False):
        made = cases(matrix, np.full(series, base), [None] * series, runs)
        comparisons += [made[i : i + PER_COMPARISON] for i in range(0, series, PER_COMPARISON)]
    return comparisons


def step_cases(rng: np.random.Generator, series: int, noise: float, repetitions: int,
               runs: int = 1) -> list[Case]:
    """A 10 % step (up or down) on a night with a full history before it; base: the night
    before, head: the step's first `runs` nights."""
    step_at = rng.integers(LOOKBACK + 1, NIGHTS - runs + 1, series)
    up = np.arange(series) % 2 == 0
    matrix = nights(rng, series, noise, repetitions, step_at, np.where(up, STEP, -STEP))
    return cases(matrix, step_at - 1, up.tolist(), runs)


def held_to(quiet: list[list[judge.Verdict]], steps: list[judge.Verdict], wanted: list[str],
            fdr: float) -> Held:
    """The verdicts held to `fdr`: the share of quiet series flagged, of quiet comparisons
    failing, and of steps found with 1, 10 or 100 of a comparison's 100 series moving (the
    others a quiet comparison's)."""
    held = [judge.control(verdicts, fdr) for verdicts in quiet]
    fa = sum(v.state in FLAGGED for verdicts in held for v in verdicts) / sum(map(len, held))
    gate = np.mean([any(v.state == REGRESSION for v in verdicts) for verdicts in held])
    recall = {}
    for moving in MOVING:
        found = 0
        for start in range(0, len(steps) - moving + 1, moving):
            others = quiet[(start // moving) % len(quiet)]
            mixed = steps[start : start + moving] + others[: PER_COMPARISON - moving]
            found += sum(v.state == want for v, want in zip(
                judge.control(mixed, fdr)[:moving], wanted[start : start + moving],
                strict=True))
        recall[moving] = found / (len(steps) - len(steps) % moving)
    return Held(fa, float(gate), recall)


@dataclass
class TwoStage:
    """`gate --confirm CONFIRM --runs RERUNS` in a CI that runs the head again on exit 4."""

    again: float  # share of quiet comparisons asked to run again
    gate: float  # share of quiet comparisons failing in the end
    fails: dict[int, float]  # comparisons with steps up failing in the end, by series moving
    fixed: float  # the fixed rule's recall on the same steps up (one run)


def two_stage(rng: np.random.Generator, series: int, noise: float,
              repetitions: int) -> TwoStage:
    """Quiet comparisons and 10 % regressions (steps up), judged on one run of the head;
    where the gate would exit 4, judged again on RERUNS runs of it."""
    matrix = nights(rng, series, noise, repetitions)
    quiet: list[tuple[list[judge.Verdict], list[judge.Verdict]]] = []
    for base in rng.choice(np.arange(LOOKBACK, NIGHTS - RERUNS), QUIET_NIGHTS, replace=False):
        once, thrice = (cases(matrix, np.full(series, base), [None] * series, runs)
                        for runs in (1, RERUNS))
        quiet += [([case.judged() for case in once[i : i + PER_COMPARISON]],
                   [case.judged() for case in thrice[i : i + PER_COMPARISON]])
                  for i in range(0, series, PER_COMPARISON)]
    step_at = rng.integers(LOOKBACK + 1, NIGHTS - RERUNS + 1, series)
    stepped = nights(rng, series, noise, repetitions, step_at, np.full(series, STEP))
    once, thrice = (cases(stepped, step_at - 1, [True] * series, runs) for runs in (1, RERUNS))
    steps = [(a.judged(), b.judged()) for a, b in zip(once, thrice, strict=True)]

    def final(first: list[judge.Verdict], again: list[judge.Verdict]):
        held = judge.control(first, RULES.fdr)
        if not any(v.state == REGRESSION for v in held) and any(
                v.state == NOISY and v.held == REGRESSION and v.adjusted <= CONFIRM
                for v in held):
            return judge.control(again, RULES.fdr), True
        return held, False

    ended = [final(*pair) for pair in quiet]
    fails = {}
    for moving in MOVING:
        failed = []
        for start in range(0, series - moving + 1, moving):
            first, again = quiet[(start // moving) % len(quiet)]
            mixed = steps[start : start + moving]
            verdicts, _ = final([a for a, _ in mixed] + first[: PER_COMPARISON - moving],
                                [b for _, b in mixed] + again[: PER_COMPARISON - moving])
            failed.append(any(v.state == REGRESSION for v in verdicts))
        fails[moving] = float(np.mean(failed))
    return TwoStage(float(np.mean([asked for _, asked in ended])),
                    float(np.mean([any(v.state == REGRESSION for v in held)
                                   for held, _ in ended])),
                    fails, float(np.mean([case.fixed() == REGRESSION for case in once])))


def rerun(rng: np.random.Generator, series: int, noise: float, repetitions: int) -> Held:
    """The default rate's figures when the head commit was run RERUNS times."""
    quiet = [[case.judged() for case in comparison]
             for comparison in quiet_comparisons(rng, series, noise, repetitions, RERUNS)]
    steps = step_cases(rng, series, noise, repetitions, RERUNS)
    return held_to(quiet, [case.judged() for case in steps],
                   [REGRESSION if case.worse else IMPROVEMENT for case in steps], RULES.fdr)


def frontier(quiet: list[list[judge.Verdict]], steps: list[judge.Verdict], wanted: list[str],
             recall: float) -> Frontier:
    """The largest p-value cutoff needed for the verdicts to find `recall` of the steps
    (judged in the right direction, at or below the cutoff), and the share of quiet series
    and of quiet comparisons it flags: the price of the fixed rule's recall on an isolated
    step for any rule that ranks a comparison's series by this p-value."""
    found = sorted(v.p_value for v, want in zip(steps, wanted, strict=True)
                   if v.state == want and v.p_value is not None)
    needed = math.ceil(recall * len(steps))
    if needed > len(found):
        return Frontier(math.nan, math.nan, math.nan)
    cutoff = found[needed - 1] if needed else 0.0

    def flagged(v: judge.Verdict, states=FLAGGED) -> bool:
        return v.state in states and v.p_value is not None and v.p_value <= cutoff

    count = sum(map(len, quiet))
    fa = sum(flagged(v) for verdicts in quiet for v in verdicts) / count
    gate = float(np.mean([any(flagged(v, (REGRESSION,)) for v in verdicts)
                          for verdicts in quiet]))
    return Frontier(cutoff, fa, gate)


def _section(title: str, header: str, rows) -> None:
    print(f"\n{title}")
    print(header)
    print("-" * len(header))
    for row in rows:
        print(row)


def _rate(value: float) -> str:
    return f"{value:8.4%}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=2000,
                        help="series per noise level and variant (a multiple of 100)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--quick", action="store_true", help="a fifth of the series")
    args = parser.parse_args()
    series = max(PER_COMPARISON, (args.series // (5 if args.quick else 1))
                 // PER_COMPARISON * PER_COMPARISON)
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    print(f"{series} series x {NIGHTS} nights per noise level and variant, lower is better; "
          f"history: the last {LOOKBACK} points up to the base; tolerance {TOLERANCE:.0%}, "
          f"FDR {RULES.fdr:g} over {PER_COMPARISON} series a comparison; fixed rule: "
          f"|head/base - 1| > {FIXED:.0%}\nFA: share of quiet series-comparisons flagged "
          f"(regression, improvement, changed); gate: share of comparisons of "
          f"{PER_COMPARISON} quiet series with a regression (the gate fails); recall: 10 % "
          f"steps judged in the right direction, new rule with 1 / 10 / 100 of the "
          f"{PER_COMPARISON} series moving\n")
    header = (f"{'variant':<14} {'noise':>5} | {'FA fixed':>8} {'FA new':>8} {'ratio':>7} | "
              f"{'gate fixed':>10} {'gate new':>8} | {'recall fixed':>12} "
              f"{'new 1/100':>9} {'10/100':>7} {'100/100':>7}")
    print(header)
    print("-" * len(header))
    holds = True
    problems = []
    trade: list[tuple[str, float, Figures]] = []
    for variant, repetitions in VARIANTS:
        for noise in NOISES:
            f = measure(rng, series, noise, repetitions, FDRS)
            trade.append((variant, noise, f))
            # No new false alarm: the ratio is at least fixed / (3 / quiet), the new rate's
            # 95 % upper bound.
            ratio = (f"{f.fixed_fa / f.new_fa:6.0f}x" if f.new_fa else
                     f">={f.fixed_fa * f.quiet / 3:.{0 if f.fixed_fa * f.quiet >= 30 else 1}f}x"
                     if f.fixed_fa else "-")
            print(f"{variant:<14} {noise:5.0%} | {_rate(f.fixed_fa)} {_rate(f.new_fa)} "
                  f"{ratio:>7} | {f.fixed_gate:10.1%} {f.new_gate:8.1%} | "
                  f"{f.fixed_recall:12.1%} {f.new_recall[1]:9.1%} {f.new_recall[10]:7.1%} "
                  f"{f.new_recall[100]:7.1%}")
            if noise != CHECKED_NOISE:
                continue
            # With no new false alarm, a tenth is shown when fixed * quiet >= 30.
            upper = f.new_fa if f.new_fa else 3 / f.quiet
            if f.fixed_fa < RATIO * upper:
                holds = False
                problems.append(f"{variant}: FA {f.new_fa:.4%} is not a {RATIO}th of "
                                f"{f.fixed_fa:.4%}")
            for moving in CHECKED_MOVING:
                new, fixed = f.new_recall[moving], f.fixed_recall
                # One standard error of the difference of two shares of `steps` each.
                error = math.sqrt((new * (1 - new) + fixed * (1 - fixed)) / f.steps)
                if new < fixed - error:
                    holds = False
                    problems.append(f"{variant}: recall {new:.1%} with {moving}/100 moving "
                                    f"< the fixed rule's {fixed:.1%}")
    # The rate's trade-off, from the same verdicts. A row starts "q <rate>", so that its third
    # word is never a noise level (tests/regressions/test_perf_scripts.py counts those).
    print(f"\nThe false discovery rate's trade-off (new rule; the default is {RULES.fdr:g}): "
          f"FA, gate and recall as above, with the same verdicts held to each rate q")
    header = (f"{'rate':<7} | {'variant':<14} {'noise':>5} | {'FA':>8} {'gate':>6} | "
              f"{'recall 1/100':>12} {'10/100':>7} {'100/100':>7}")
    print(header)
    print("-" * len(header))
    for fdr in FDRS:
        for variant, noise, f in trade:
            held = f.by_fdr[fdr]
            print(f"q {fdr:<5g} | {variant:<14} {noise:5.0%} | {_rate(held.fa)} "
                  f"{held.gate:6.1%} | {held.recall[1]:12.1%} {held.recall[10]:7.1%} "
                  f"{held.recall[100]:7.1%}")
    _section(
        "What the fixed rule's recall on an isolated 10 % step costs: the same verdicts "
        "flagged at the per-series p-value cutoff (no false discovery rate) that finds the "
        f"steps as often as the fixed rule; FA and gate on the quiet comparisons of "
        f"{PER_COMPARISON} series, as above",
        f"{'variant':<14} {'noise':>5} | {'recall fixed':>12} {'cutoff p':>9} | {'FA':>8} "
        f"{'gate':>6}",
        (f"{variant:<14} {noise:5.0%} | {f.fixed_recall:12.1%} {f.frontier.cutoff:9.2g} | "
         f"{_rate(f.frontier.fa)} {f.frontier.gate:6.1%}" for variant, noise, f in trade))
    again = [rerun(rng, series, noise, dict(VARIANTS)[variant]) for variant, noise, _ in trade]
    _section(
        f"Re-running the head: the head commit run {RERUNS} times (its runs judged "
        "together), at the default rate; fixed rule and one run as in the first table",
        f"{'variant':<14} {'noise':>5} | {'FA':>8} {'gate':>6} | {'recall 1/100':>12} "
        f"{'10/100':>7} {'100/100':>7} | {'one run 1/100':>13}",
        (f"{variant:<14} {noise:5.0%} | {_rate(held.fa)} {held.gate:6.1%} | "
         f"{held.recall[1]:12.1%} {held.recall[10]:7.1%} {held.recall[100]:7.1%} | "
         f"{f.new_recall[1]:13.1%}" for (variant, noise, f), held in zip(trade, again,
                                                                         strict=True)))
    staged = [two_stage(rng, series, noise, dict(VARIANTS)[variant])
              for variant, noise, _ in trade]
    _section(
        f"Confirming by running again: `gate --confirm {CONFIRM:g} --runs {RERUNS}` at the "
        f"default rate, in a CI that runs the head again (to {RERUNS} runs) when the gate "
        f"asks (exit 4): quiet comparisons of {PER_COMPARISON} series asked to run again and "
        "failing in the end; comparisons with a 10 % regression (a step up) in 1 / 10 / 100 "
        "of their series failing in the end; the fixed rule's recall on the same steps",
        f"{'variant':<14} {'noise':>5} | {'run again':>9} {'gate':>6} | {'fails 1/100':>11} "
        f"{'10/100':>7} {'100/100':>7} | {'fixed':>6}",
        (f"{variant:<14} {noise:5.0%} | {two.again:9.1%} {two.gate:6.1%} | "
         f"{two.fails[1]:11.1%} {two.fails[10]:7.1%} {two.fails[100]:7.1%} | {two.fixed:6.1%}"
         for (variant, noise, _), two in zip(trade, staged, strict=True)))
    print(f"\n({time.perf_counter() - started:.0f} s; quiet series-comparisons per row: "
          f"{series * QUIET_NIGHTS}, in {series * QUIET_NIGHTS // PER_COMPARISON} "
          f"comparisons; steps per row: {series})")
    print(f"at least {RATIO}x fewer false alarms at {CHECKED_NOISE:.0%} noise, no loss of "
          f"recall on 10% steps ({' and '.join(f'{m}/100' for m in CHECKED_MOVING)} "
          f"moving): {'holds' if holds else 'DOES NOT HOLD'}")
    for problem in problems:
        print(f"  {problem}")
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())
