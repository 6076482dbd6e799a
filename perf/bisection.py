"""Bisection cost on the demo repository: commits measured, rounds and wall time against the
log2 bound, and against measuring every commit once (the rounds' own mean time, this run).

    .venv/bin/python perf/bisection.py [--commits 25] [--mode command|pythonpath] [--runs 1]

Makes the demo repository (runner.sources.demo: a build broken for two commits, the model
recomputing its hidden layer demo.SLOWDOWN times from commit 17) in a temporary folder and
bisects it end to end, as a worker does (the Celery task, in-process), with a throwaway
SQLite database under var/.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=25, help="the demo's commits (>= 20)")
    parser.add_argument("--mode", choices=["command", "pythonpath"], default="command")
    parser.add_argument("--runs", type=int, default=1, help="bisects, each with a cold cache")
    args = parser.parse_args()

    database = ROOT / "var" / "perf-bisect.db"
    database.unlink(missing_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="perf-bisect-"))
    os.environ.update(DJANGO_SETTINGS_MODULE="benchsite.settings",
                      DATABASE_URL=f"sqlite:///{database}", CELERY_BROKER_URL="",
                      LOG_LEVEL="WARNING")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from benchsite.access.models import AllowedCodeModule
    from benchsite.bisects.models import Source, describe
    from benchsite.bisects.start import start_spec
    from runner.sources import demo

    call_command("migrate", verbosity=0)
    AllowedCodeModule.objects.create(module="demopkg")
    shas = demo.make(folder / "repo", commits=args.commits)
    n = len(shas) - 1
    bound = math.ceil(math.log2(n)) + 3
    print(f"demo repository: {n} commits after the good one, slowdown {demo.SLOWDOWN}x at "
          f"{demo.SLOW}, broken build at {demo.BROKEN}-{demo.BROKEN + 1}; mode {args.mode}")
    print(f"{'run':>3} {'state':>10} {'right':>5} {'measured':>8} {'bound':>5} {'skipped':>7} "
          f"{'rounds':>6} {'reps':>5} {'wall s':>7} {'s/round':>7} {'linear s':>8}")
    for run in range(args.runs):
        settings.BENCH_SOURCE_CACHE = str(folder / f"cache-{run}")
        source = Source.objects.create(
            name=f"demo-{run}", location=str(folder / "repo"), repo="demo/pkg", mode=args.mode,
            build_command=demo.BUILD_COMMAND if args.mode == "command" else "")
        started = time.perf_counter()
        bisect = start_spec(spec_yaml=demo.SPEC, spec_name="demo.yml", source=source,
                            good=shas[0], bad=shas[-1])  # autocommit: runs as it commits
        wall = time.perf_counter() - started
        bisect.refresh_from_db()
        steps = list(bisect.steps.all())
        measured = [step for step in steps if step.rounds]
        rounds = sum(len(step.rounds) for step in measured)
        reps = sum(len(step["values"]) for step in describe(bisect)["steps"])
        per_round = wall / max(rounds, 1)
        print(f"{run:>3} {bisect.state:>10} {str(bisect.culprit_sha == shas[demo.SLOW]):>5} "
              f"{len(measured):>8} {bound:>5} {len(steps) - len(measured):>7} {rounds:>6} "
              f"{reps:>5} {wall:>7.1f} {per_round:>7.2f} {(n + 1) * per_round:>8.1f}")
        runs_by_commit = ", ".join(f"{s.position}:{len(s.rounds)}" for s in steps)
        print(f"    rounds by position: {runs_by_commit}")
    print("measured: commits with at least one round (the bound is ceil(log2 N) + 3); "
          "linear s: one round at every commit, at this run's mean time per round (a lower "
          "bound for a linear scan, which would also need the repeated, interleaved rounds)")



if __name__ == "__main__":
    main()
