"""How much of a run is measurement, and how repeatable the speedups are.

Runs a small CPU spec (fixtures/specs/cpu_small.yml by default) several times with the
runner's default timing settings, and prints:
- per run: total wall time, time inside timed calls, and the rest (overhead) as a share;
- per cell: the headline speedup of every run and its coefficient of variation (CV).

    .venv/bin/python perf/runner_overhead.py [SPEC] [--runs 5]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path

from runner.engine.timing_data import TimingSettings
from runner.quant.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", nargs="?", type=Path,
                        default=ROOT / "fixtures" / "specs" / "cpu_small.yml")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)

    import torch

    from runner.quant.execute import run_spec

    spec = load_spec(args.spec)
    settings = TimingSettings()
    cells = spec.cells()
    print(f"spec: {args.spec.relative_to(ROOT) if args.spec.is_relative_to(ROOT) else args.spec}"
          f" ({len(cells)} cells), torch {torch.__version__}, {settings}")
    print(f"{'run':>3}  {'wall s':>8}  {'measured s':>10}  {'overhead s':>10}  {'overhead':>8}")
    speedups: dict[str, list[float]] = {}
    walls, measured = [], []
    for run in range(1, args.runs + 1):
        started = time.perf_counter()
        results = run_spec(cells, settings)
        wall = time.perf_counter() - started
        inside = sum(result.measured_s for result in results)
        walls.append(wall)
        measured.append(inside)
        print(f"{run:>3}  {wall:8.2f}  {inside:10.2f}  {wall - inside:10.2f}  "
              f"{(wall - inside) / wall:8.1%}")
        for result in results:
            if result.speedup is not None:
                speedups.setdefault(result.cell.key, []).append(result.speedup)
    total_wall, total_measured = sum(walls), sum(measured)
    print(f"all  {total_wall:8.2f}  {total_measured:10.2f}  {total_wall - total_measured:10.2f}  "
          f"{(total_wall - total_measured) / total_wall:8.1%}")

    print(f"\nspeedup over {args.runs} runs (median of the interleaved pairs per run)")
    width = max(len(key) for key in speedups)
    print(f"{'cell':<{width}}  {'mean':>6}  {'min':>6}  {'max':>6}  {'CV':>6}")
    cvs = []
    for key, values in speedups.items():
        mean = statistics.fmean(values)
        cv = statistics.stdev(values) / mean if len(values) > 1 else 0.0
        cvs.append(cv)
        print(f"{key:<{width}}  {mean:6.3f}  {min(values):6.3f}  {max(values):6.3f}  {cv:6.2%}")
    print(f"speedup CV: median {statistics.median(cvs):.2%}, max {max(cvs):.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
