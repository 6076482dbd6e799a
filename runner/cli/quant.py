"""The quantization family's part of `python -m runner run` (runner.cli.run): its options (timing,
torchao-style CSV) and running a torchao microbenchmark config with a progress bar and a
results table.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from runner.cli.outputs import finish, interrupt, listing, status_counts
from runner.cli.timing_options import add_timing_options, timing_overrides
from runner.engine.run_context import RunContext
from runner.engine.run_settings import settings_problems
from runner.engine.selection import select
from runner.engine.timing_data import TimingSettings
from runner.quant.cells import QuantCell
from runner.quant.records import cell_records
from runner.quant.report import table, write_csv
from runner.quant.results import CellResult
from runner.quant.spec import parse_spec


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--csv", type=Path, help="write torchao-style CSV here")
    add_timing_options(parser)


def run_spec(data: Any, args: argparse.Namespace) -> int:
    """Run a parsed torchao config as the options say; SpecError when it is invalid."""
    spec = parse_spec(data, str(args.spec))
    cells = select(spec.cells(), args.cells, str(args.spec))
    if args.dry_run:
        print(listing([cell.key for cell in cells]))
        return 0
    overrides = {**spec.timing, **timing_overrides(args)}
    problems = settings_problems(overrides, TimingSettings, "timing")
    if problems:
        print("error: " + "; ".join(problems), file=sys.stderr)
        return 2
    logging.basicConfig(
        level=logging.WARNING if args.verbose else logging.ERROR,
        format="%(levelname)s %(name)s: %(message)s",
    )
    settings = TimingSettings(**overrides)
    results, interrupted = _run_cells(cells, settings)
    context = RunContext.collect()
    records = [record for result in results for record in cell_records(result, context)]
    print(table(results))
    if args.csv:
        write_csv(args.csv, results)
        print(f"CSV written to {args.csv}")
    stopped = (f"{len(results)} of {len(cells)} cells finished, outputs hold those; "
               "nothing uploaded") if interrupted else ""
    return finish(args, records, status_counts(results), stopped)


def _run_cells(cells: list[QuantCell], settings: TimingSettings) -> tuple[list[CellResult], bool]:
    """Run cells under a progress bar; Ctrl-C or SIGTERM stops after what has finished."""
    from tqdm import tqdm  # the runner extra's: --dry-run needs only the base install

    from runner.quant.execute import run_spec  # torch: only once cells run

    results: list[CellResult] = []
    bar = tqdm(total=len(cells), unit="cell", file=sys.stderr)

    def finished(result: CellResult) -> None:
        results.append(result)
        bar.set_postfix_str(f"{result.cell.label} {result.cell.shape.mkn}: {result.status}")
        bar.update()

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        run_spec(cells, settings, on_cell=finished)
        return results, False
    except KeyboardInterrupt:
        return results, True
    finally:
        bar.close()
        signal.signal(signal.SIGTERM, previous)
