"""The bisection's decisions under bursts of load, on a simulated lab (seconds, not hours):
for each slowdown and burst rate, many seeds of the range 0..23 (culprit 15) and of a
quiet range 0..12 (no change), counted as right / ambiguous / not reproduced / wrong, with
the commits and rounds measured.

    .venv/bin/python perf/bisection_bursts.py [--seeds 40] [--burst 2.0] [--jitter 0.10]

The lab is the tests' (tests/bisects/test_search.py `FakeLab`): 3 % noise, 6 repetitions a
round, and a chance per round that the whole round runs `--burst` times slower (another
process on the machine), and with `--jitter` a spread of each whole round's level (a real
machine's rounds differ by more than their repetitions do). perf/bisection.py measures the
same on real commits.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CASES = [(32.0, 0.0), (32.0, 1 / 6), (1.5, 0.0), (1.5, 1 / 6), (1.2, 0.0), (1.2, 1 / 6),
         (1.1, 0.0), (1.1, 0.1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--burst", type=float, default=2.0, help="a burst's slowdown (x)")
    parser.add_argument("--jitter", type=float, default=0.0,
                        help="the relative spread of a whole round's level (FakeLab's)")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from benchsite.bisects import search
    from tests.bisects.test_search import FakeLab, step

    print(f"{'step':>5} {'bursts':>6} {'range':>6} {'right':>5} {'ambiguous':>9} "
          f"{'not repr.':>9} {'WRONG':>5} {'median commits':>14} {'bound':>5} "
          f"{'median rounds':>13}")
    for factor, bursts in CASES:
        for kind, n, level in (("range", 23, step(15, factor)), ("quiet", 12, lambda p: 1.0)):
            counts = dict.fromkeys(("right", "ambiguous", "not repr.", "WRONG"), 0)
            commits, rounds = [], []
            for seed in range(args.seeds):
                lab = FakeLab(level, seed=seed, bursts=bursts, burst=args.burst,
                              jitter=args.jitter)
                outcome = search.bisect(lab, n, 1, search.Settings())
                if kind == "range":
                    verdict = ("right" if outcome.culprit == 15 else "WRONG"
                               if outcome.culprit is not None else
                               "ambiguous" if outcome.state == search.AMBIGUOUS
                               else "not repr.")
                else:
                    verdict = ("WRONG" if outcome.culprit is not None else
                               "ambiguous" if outcome.state == search.AMBIGUOUS else "right")
                counts[verdict] += 1
                commits.append(len(lab.measured()))
                rounds.append(len(lab.log))
            print(f"{factor:>5g} {bursts:>6.2f} {kind:>6} {counts['right']:>5} "
                  f"{counts['ambiguous']:>9} {counts['not repr.']:>9} {counts['WRONG']:>5} "
                  f"{statistics.median(commits):>14g} {math.ceil(math.log2(n)) + 3:>5} "
                  f"{statistics.median(rounds):>13g}")


if __name__ == "__main__":
    main()
