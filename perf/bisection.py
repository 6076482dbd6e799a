"""Bisection on real commits, swept: slowdowns of 1.5x, 1.2x and 1.1x, on a quiet machine
and beside this script's own competing load (perf/competing_load.py), several seeds each;
per case the bisect of the range (the culprit is the demo's SLOW commit) and of a quiet
range before it (no change: want "not reproduced"), with the commits measured against the
ceil(log2 N) + 3 bound, rounds and wall time.

    .venv/bin/python perf/bisection.py [--steps 1.5,1.2,1.1] [--loads 0,1] [--seeds 5]
        [--commits 25] [--mode command|pythonpath]

Makes the demo repository (runner.sources.demo: a build broken for two commits, the model
computing its hidden layer more times from commit SLOW on: 4 -> 6 passes is about 1.5x) in a
temporary folder per step and bisects it end to end, as a worker does (the Celery task,
in-process), with a throwaway SQLite database under var/. A wrong culprit is the failure
that matters: it is counted apart from "ambiguous".
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perf.competing_load import competing, loadavg  # noqa: E402

# Hidden-layer passes before and from the slow commit, for each slowdown swept.
PASSES = {1.5: (4, 6), 1.2: (5, 6), 1.1: (10, 11), 32.0: (1, 32)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="1.5,1.2,1.1",
                        help=f"slowdowns, of {', '.join(map(str, PASSES))}")
    parser.add_argument("--loads", default="0,1", help="competing processes, per case")
    parser.add_argument("--seeds", type=int, default=5, help="bisects of each range per case")
    parser.add_argument("--commits", type=int, default=25, help="the demo's commits (>= 20)")
    parser.add_argument("--mode", choices=["command", "pythonpath"], default="command")
    args = parser.parse_args()
    steps = [float(step) for step in args.steps.split(",")]
    unknown = [step for step in steps if step not in PASSES]
    if unknown:
        parser.error(f"--steps: {unknown} not among {sorted(PASSES)}")

    database = ROOT / "var" / "perf-bisect.db"
    database.unlink(missing_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="perf-bisect-"))
    os.environ.update(DJANGO_SETTINGS_MODULE="benchsite.settings",
                      DATABASE_URL=f"sqlite:///{database}", LOG_LEVEL="WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    from benchsite.access.models import AllowedCodeModule
    from benchsite.celery import app

    app.conf.task_always_eager = True  # each bisect's task runs here, as a worker runs it

    call_command("migrate", verbosity=0)
    AllowedCodeModule.objects.create(module="demopkg")
    print(f"{'step':>5} {'load':>4} {'range':>6} {'seed':>4} {'state':>14} {'verdict':>8} "
          f"{'commits':>7} {'bound':>5} {'rounds':>6} {'wall s':>7}  load average")
    cases = []
    for step in steps:
        shas, source = repository(folder, step, args)
        for load in (int(value) for value in args.loads.split(",")):
            with competing(load):
                cases.append(sweep(step, load, shas, source, args.seeds))
    print("\nper case (range: the culprit wanted; quiet: not reproduced wanted):")
    print(f"{'step':>5} {'load':>4} {'range':>6} {'right':>5} {'ambiguous':>9} "
          f"{'not repr.':>9} {'WRONG':>5} {'failed':>6} {'median commits':>14} "
          f"{'median rounds':>13} {'median s':>8}")
    for rows in cases:
        for kind in ("range", "quiet"):
            chosen = [row for row in rows if row["range"] == kind]
            count = {name: sum(row["verdict"] == name for row in chosen)
                     for name in ("right", "ambiguous", "not repr.", "WRONG", "failed")}
            print(f"{chosen[0]['step']:>5} {chosen[0]['load']:>4} {kind:>6} "
                  f"{count['right']:>5} {count['ambiguous']:>9} {count['not repr.']:>9} "
                  f"{count['WRONG']:>5} {count['failed']:>6} "
                  f"{statistics.median(r['commits'] for r in chosen):>14} "
                  f"{statistics.median(r['rounds'] for r in chosen):>13} "
                  f"{statistics.median(r['wall'] for r in chosen):>8.0f}")


def repository(folder: Path, step: float, args) -> tuple[list[str], object]:
    from django.conf import settings

    from benchsite.bisects.models import Source
    from runner.sources import demo

    shas = demo.make(folder / f"repo-{step}", commits=args.commits, passes=PASSES[step])
    settings.BENCH_SOURCE_CACHE = str(folder / f"cache-{step}")  # builds kept across seeds
    source = Source.objects.create(
        name=f"demo-{step}", location=str(folder / f"repo-{step}"), repo=f"demo/pkg-{step}",
        mode=args.mode, build_command=demo.BUILD_COMMAND if args.mode == "command" else "")
    print(f"# {step}x: {len(shas) - 1} commits after the good one, passes {PASSES[step]} "
          f"from commit {demo.SLOW}; broken build at {demo.BROKEN}-{demo.BROKEN + 1}")
    return shas, source


def sweep(step: float, load: int, shas: list[str], source, seeds: int) -> list[dict]:
    from benchsite.bisects.models import describe
    from benchsite.bisects.start import start_spec
    from runner.sources import demo

    rows = []
    for seed in range(seeds):
        for kind, bad in (("range", len(shas) - 1), ("quiet", demo.SLOW - 1)):
            started = time.perf_counter()
            bisect = start_spec(spec_yaml=demo.SPEC, spec_name="demo.yml", source=source,
                                good=shas[0], bad=shas[bad])  # autocommit: as it commits
            wall = time.perf_counter() - started
            bisect.refresh_from_db()
            steps = describe(bisect)["steps"]
            measured = [entry for entry in steps if entry["rounds"]]
            if kind == "range":
                verdict = {"culprit": "right" if bisect.culprit_sha == shas[demo.SLOW]
                           else "WRONG", "ambiguous": "ambiguous",
                           "not_reproduced": "not repr."}.get(bisect.state, "failed")
            else:
                verdict = {"not_reproduced": "right", "culprit": "WRONG",
                           "ambiguous": "ambiguous"}.get(bisect.state, "failed")
            row = {"step": step, "load": load, "range": kind, "verdict": verdict,
                   "commits": len(measured), "rounds": sum(e["rounds"] for e in measured),
                   "wall": wall}
            rows.append(row)
            print(f"{step:>5} {load:>4} {kind:>6} {seed:>4} {bisect.state:>14} {verdict:>8} "
                  f"{len(measured):>7} {math.ceil(math.log2(bad)) + 3:>5} {row['rounds']:>6} "
                  f"{wall:>7.1f}  {loadavg()}", flush=True)
    return rows


if __name__ == "__main__":
    main()
