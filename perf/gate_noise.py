"""False alarms of the commit-comparison gate on quiet commits, against the fixed 5 % rule.

    .venv/bin/python perf/gate_noise.py [--series 2000] [--seed 11] [--quick]

Synthetic nightly histories (one point a night for 120 nights, lower is better, a level
drawn at random per series) at 1 %, 2 % and 5 % noise, in two variants: one value a night
(the noise is that of the value), and 5 repetitions a night, whose run-to-run noise (shared
by a night's repetitions) is the noise named and whose within-run noise is a third of it.

Each series is judged the way `benchsite.comparison.compare` judges it, with the pure
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
- 10 % steps: base the night before the step, head its first night(s), with 1, 10 or 100
  of a comparison's 100 series moving (the others a quiet comparison's): the new rule
  holds a comparison's series to a false discovery rate, so its recall depends on how many
  moved.

The gate as shipped (first table, checked): `runner gate` judges one run of the head and,
where a regression the false discovery rate held back as noise would fail at the looser
rate `runner.cli.gate.CONFIRM`, asks for another run (exit 4); a CI that runs the head again
(the README's loop) has it judged on all its runs, up to `runner.cli.gate.RUNS`. Each stage is
decided by `runner.cli.gate.run_again` itself. Its recall: 10 % regressions (steps up) failing
the comparison, against the fixed rule flagging them on one run.

The other tables (no check): one run of the head, as the compare page and API judge it,
held to q = 0.005 (the default, `DetectionSettings.compare_fdr`), 0.05 and 0.25; the
per-series p-value cutoff one run would need to find isolated steps as often as the fixed
rule, and its price on quiet comparisons; the head always run RUNS times.

The check (exit status 1 when it fails): at 2 % noise, in both variants, the shipped
gate's false-alarm rate per series is at most a tenth of the fixed rule's, and its recall
on 10 % regressions is no lower than the fixed rule's (within one standard error of the
difference) with 10 of 100 series moving, and with 1 of 100. Pure functions: no database.
--quick: a fifth of the series (for tests).
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

from benchsite.comparison import judge, points  # noqa: E402
from benchsite.comparison.judge import (  # noqa: E402
    CHANGED,
    IMPROVEMENT,
    REGRESSION,
    Rules,
)
from runner.cli import gate  # noqa: E402
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
    """One run of the head, as the compare page and API judge it: the fixed rule's recall
    on steps either way, the new rule's figures at each rate, the frontier."""

    fixed_recall: float
    by_fdr: dict[float, Held]  # the new rule's figures at each of `fdrs`
    frontier: Frontier


def measure(rng: np.random.Generator, series: int, noise: float, repetitions: int,
            fdrs: tuple[float, ...] = FDRS) -> Figures:
    """One run's figures at each of `fdrs` (the same verdicts, held to each rate)."""
    quiet = [[case.judged() for case in comparison]
             for comparison in quiet_comparisons(rng, series, noise, repetitions)]
    steps = step_cases(rng, series, noise, repetitions)
    verdicts = [case.judged() for case in steps]
    wanted = [REGRESSION if case.worse else IMPROVEMENT for case in steps]
    fixed_recall = float(np.mean([case.fixed() == want
                                  for case, want in zip(steps, wanted, strict=True)]))
    return Figures(fixed_recall, {fdr: held_to(quiet, verdicts, wanted, fdr) for fdr in fdrs},
                   frontier(quiet, verdicts, wanted, fixed_recall))


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
class Shipped:
    """The gate as shipped: one run of the head; where it asks for another (exit 4,
    `runner.cli.gate.run_again` at its default --confirm), the head runs again, up to gate.RUNS
    runs, each time judged on all its runs. Its figures and the fixed rule's, on the same
    quiet comparisons and 10 % regressions (steps up)."""

    fixed_fa: float  # quiet series-comparisons the fixed rule flags
    fa: float  # quiet series-comparisons flagged in the end
    fixed_gate: float  # quiet comparisons the fixed rule fails
    gate: float  # quiet comparisons failing in the end
    again: float  # quiet comparisons asked to run again at least once
    runs: float  # mean runs of the head per quiet comparison
    fixed_recall: float  # regressions the fixed rule flags
    fails: dict[int, float]  # comparisons with a regression in 1 / 10 / 100 series failing
    quiet: int
    steps: int


def gate_decision(stages: list[list[judge.Verdict]]) -> tuple[list[judge.Verdict], int]:
    """The gate's verdicts in the end, and the runs of the head it took: the verdicts of
    the head's first k runs (`stages[k - 1]`) held to the default rate, run by run, until
    the gate fails or no longer asks for another run (`runner.cli.gate.run_again`)."""
    for runs, verdicts in enumerate(stages, 1):
        held = judge.control(verdicts, RULES.fdr)
        rows = [{"state": v.state, "held": v.held, "adjusted_p": v.adjusted, "head_runs": runs}
                for v in held]
        if any(v.state == REGRESSION for v in held) or not gate.run_again(
                {"rows": rows}, {REGRESSION}, gate.CONFIRM, gate.RUNS):
            return held, runs
    return held, len(stages)


def shipped(rng: np.random.Generator, series: int, noise: float,
            repetitions: int) -> Shipped:
    """Quiet comparisons and 10 % regressions judged as the shipped gate judges them."""
    runs = range(1, gate.RUNS + 1)
    matrix = nights(rng, series, noise, repetitions)
    quiet: list[list[list[judge.Verdict]]] = []  # per comparison: the verdicts per run count
    fixed: list[list[str]] = []
    for base in rng.choice(np.arange(LOOKBACK, NIGHTS - gate.RUNS), QUIET_NIGHTS,
                           replace=False):
        made = [cases(matrix, np.full(series, base), [None] * series, k) for k in runs]
        for i in range(0, series, PER_COMPARISON):
            quiet.append([[case.judged() for case in by_runs[i : i + PER_COMPARISON]]
                          for by_runs in made])
            fixed.append([case.fixed() for case in made[0][i : i + PER_COMPARISON]])
    step_at = rng.integers(LOOKBACK + 1, NIGHTS - gate.RUNS + 1, series)
    stepped = nights(rng, series, noise, repetitions, step_at, np.full(series, STEP))
    made = [cases(stepped, step_at - 1, [True] * series, k) for k in runs]
    steps = [[case.judged() for case in by_runs] for by_runs in made]  # per run count
    ended = [gate_decision(stages) for stages in quiet]
    count = series * QUIET_NIGHTS
    fails = {}
    for moving in MOVING:
        failed = []
        for start in range(0, series - moving + 1, moving):
            others = quiet[(start // moving) % len(quiet)]
            verdicts, _ = gate_decision([
                stage[start : start + moving] + other[: PER_COMPARISON - moving]
                for stage, other in zip(steps, others, strict=True)])
            failed.append(any(v.state == REGRESSION for v in verdicts))
        fails[moving] = float(np.mean(failed))
    return Shipped(
        sum(state in FLAGGED for states in fixed for state in states) / count,
        sum(v.state in FLAGGED for held, _ in ended for v in held) / count,
        float(np.mean([REGRESSION in states for states in fixed])),
        float(np.mean([any(v.state == REGRESSION for v in held) for held, _ in ended])),
        float(np.mean([k > 1 for _, k in ended])), float(np.mean([k for _, k in ended])),
        float(np.mean([case.fixed() == REGRESSION for case in made[0]])), fails, count,
        series)


def rerun(rng: np.random.Generator, series: int, noise: float, repetitions: int) -> Held:
    """The default rate's figures when the head commit was run gate.RUNS times."""
    quiet = [[case.judged() for case in comparison]
             for comparison in quiet_comparisons(rng, series, noise, repetitions, gate.RUNS)]
    steps = step_cases(rng, series, noise, repetitions, gate.RUNS)
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
          f"|head/base - 1| > {FIXED:.0%}")
    rows = [(variant, repetitions, noise) for variant, repetitions in VARIANTS
            for noise in NOISES]
    ends = [shipped(rng, series, noise, repetitions) for _, repetitions, noise in rows]
    holds, problems = True, []
    print(f"\nThe gate as shipped (`runner gate`: one run of the head; on exit 4, run again, "
          f"up to {gate.RUNS} runs judged together; --confirm {gate.CONFIRM:g}) against the "
          f"fixed rule on the same commits. FA: share of quiet series-comparisons flagged "
          f"(regression, improvement, changed) in the end; gate: share of comparisons of "
          f"{PER_COMPARISON} quiet series failing; again: share asked to run again, runs: "
          f"mean runs of the head; recall: a 10 % regression (step up) in 1 / 10 / 100 of "
          f"the {PER_COMPARISON} series fails the comparison (fixed: the rule flags it)")
    header = (f"{'variant':<14} {'noise':>5} | {'FA fixed':>8} {'FA gate':>8} {'ratio':>7} | "
              f"{'gate fixed':>10} {'gate':>5} {'again':>6} {'runs':>4} | "
              f"{'recall fixed':>12} {'1/100':>6} {'10/100':>6} {'100/100':>7}")
    print(header)
    print("-" * len(header))
    for (variant, _, noise), end in zip(rows, ends, strict=True):
        # No false alarm left: the ratio is at least fixed / (3 / quiet), the rate's 95 %
        # upper bound.
        ratio = (f"{end.fixed_fa / end.fa:6.0f}x" if end.fa else
                 f">={end.fixed_fa * end.quiet / 3:.{0 if end.fixed_fa * end.quiet >= 30 else 1}f}x"
                 if end.fixed_fa else "-")
        print(f"{variant:<14} {noise:5.0%} | {_rate(end.fixed_fa)} {_rate(end.fa)} {ratio:>7} | "
              f"{end.fixed_gate:10.1%} {end.gate:5.1%} {end.again:6.1%} {end.runs:4.2f} | "
              f"{end.fixed_recall:12.1%} {end.fails[1]:6.1%} {end.fails[10]:6.1%} "
              f"{end.fails[100]:7.1%}")
        if noise != CHECKED_NOISE:
            continue
        if end.fixed_fa < RATIO * (end.fa or 3 / end.quiet):
            holds = False
            problems.append(f"{variant}: FA {end.fa:.4%} is not a {RATIO}th of "
                            f"{end.fixed_fa:.4%}")
        for moving in CHECKED_MOVING:
            new, fixed = end.fails[moving], end.fixed_recall
            # One standard error of the difference of two shares of `steps` each.
            error = math.sqrt((new * (1 - new) + fixed * (1 - fixed)) / end.steps)
            if new < fixed - error:
                holds = False
                problems.append(f"{variant}: recall {new:.1%} with {moving}/100 moving "
                                f"< the fixed rule's {fixed:.1%}")
    one_run = [measure(rng, series, noise, repetitions) for _, repetitions, noise in rows]
    # A row starts "q <rate>", so that its third word is never a noise level
    # (tests/regressions/test_perf_scripts.py counts those).
    _section(
        f"One run of the head, as the compare page and API judge it (and `gate --runs 1`), "
        f"held to each false discovery rate q (the default is {RULES.fdr:g}): FA and gate as "
        "above; recall: 10 % steps (half up, half down) judged in the right direction with "
        f"1 / 10 / 100 of the {PER_COMPARISON} series moving",
        f"{'rate':<7} | {'variant':<14} {'noise':>5} | {'FA':>8} {'gate':>6} | "
        f"{'recall 1/100':>12} {'10/100':>7} {'100/100':>7} | {'fixed':>6}",
        (f"q {fdr:<5g} | {variant:<14} {noise:5.0%} | {_rate(held.fa)} {held.gate:6.1%} | "
         f"{held.recall[1]:12.1%} {held.recall[10]:7.1%} {held.recall[100]:7.1%} | "
         f"{f.fixed_recall:6.1%}"
         for fdr in FDRS for (variant, _, noise), f in zip(rows, one_run, strict=True)
         for held in [f.by_fdr[fdr]]))
    _section(
        "What the fixed rule's recall on an isolated 10 % step costs one run: the same "
        "verdicts flagged at the per-series p-value cutoff (no false discovery rate) that "
        "finds the steps as often as the fixed rule; FA and gate on the quiet comparisons of "
        f"{PER_COMPARISON} series, as above",
        f"{'variant':<14} {'noise':>5} | {'recall fixed':>12} {'cutoff p':>9} | {'FA':>8} "
        f"{'gate':>6}",
        (f"{variant:<14} {noise:5.0%} | {f.fixed_recall:12.1%} {f.frontier.cutoff:9.2g} | "
         f"{_rate(f.frontier.fa)} {f.frontier.gate:6.1%}"
         for (variant, _, noise), f in zip(rows, one_run, strict=True)))
    again = [rerun(rng, series, noise, repetitions) for _, repetitions, noise in rows]
    _section(
        f"Always {gate.RUNS} runs of the head (its runs judged together), at the default "
        "rate: FA, gate and recall as in the one-run table",
        f"{'variant':<14} {'noise':>5} | {'FA':>8} {'gate':>6} | {'recall 1/100':>12} "
        f"{'10/100':>7} {'100/100':>7} | {'one run 1/100':>13}",
        (f"{variant:<14} {noise:5.0%} | {_rate(held.fa)} {held.gate:6.1%} | "
         f"{held.recall[1]:12.1%} {held.recall[10]:7.1%} {held.recall[100]:7.1%} | "
         f"{f.by_fdr[RULES.fdr].recall[1]:13.1%}"
         for (variant, _, noise), f, held in zip(rows, one_run, again, strict=True)))
    print(f"\n({time.perf_counter() - started:.0f} s; quiet series-comparisons per row: "
          f"{series * QUIET_NIGHTS}, in {series * QUIET_NIGHTS // PER_COMPARISON} "
          f"comparisons; steps per row: {series})")
    print(f"the gate as shipped: at least {RATIO}x fewer false alarms at {CHECKED_NOISE:.0%} "
          f"noise, no loss of recall on 10% regressions "
          f"({' and '.join(f'{m}/100' for m in CHECKED_MOVING)} moving): "
          f"{'holds' if holds else 'DOES NOT HOLD'}")
    for problem in problems:
        print(f"  {problem}")
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())
