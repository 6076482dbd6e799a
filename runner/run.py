"""`python -m runner run SPEC.yml`: run a benchmark spec, print a table, write and upload records.

torch is imported only once cells are about to run, so `--dry-run` (and the other
sub-commands) work with PyYAML alone.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any, NoReturn

from runner import families
from runner.families import DEFAULT as QUANTIZATION
from runner.outputs import finish
from runner.quant.cells import Cell, TimingSettings
from runner.quant.report import table, write_csv
from runner.quant.results import CellResult
from runner.quant.spec import parse_spec
from runner.specs import SpecError, read_spec
from runner.upload import add_upload_options, missing_token


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "run",
        help="run a benchmark spec (torchao microbenchmark YAML, or a `family:` spec)",
        description=(
            "Run every cell of a spec, print a results table, and write PyTorch OSS benchmark "
            "records. A torchao microbenchmark config (recipe x shape x model type x compile "
            "mode) also writes torchao-style CSV; a spec with a `family:` key (see "
            "runner.families) runs that family's cells."
        ),
    )
    parser.add_argument("spec", type=Path, metavar="SPEC")
    parser.add_argument("-o", "--output", type=Path, help="write the records (JSON list) here")
    parser.add_argument("--csv", type=Path, help="write torchao-style CSV here")
    parser.add_argument("--dry-run", action="store_true", help="list the cells, run nothing")
    parser.add_argument("-v", "--verbose", action="store_true", help="log tracebacks of failures")
    add_upload_options(parser)
    timing = parser.add_argument_group("timing")
    defaults = TimingSettings()
    timing.add_argument("--samples", type=int, default=defaults.samples,
                        help="timed samples per measurement (default: %(default)s)")
    timing.add_argument("--warmup", type=float, default=defaults.warmup_s, metavar="SECONDS",
                        help="least warm-up time per measurement (default: %(default)s)")
    timing.add_argument("--min-sample-time", type=float, default=defaults.min_sample_s,
                        metavar="SECONDS", help="CPU: least time per sample (default: %(default)s)")
    timing.add_argument("--threads", type=int, default=defaults.threads,
                        help="CPU: torch threads while timing (default: %(default)s)")
    timing.add_argument("--no-l2-flush", action="store_true",
                        help="CUDA: keep L2 warm between timed calls")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if missing_token(args):
        return 2
    try:
        data = read_spec(args.spec)
        if families.family_name(data) != QUANTIZATION:
            return _run_family(data, args)
        spec = parse_spec(data, str(args.spec))
    except SpecError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    cells = spec.cells()
    if args.dry_run:
        print(_listing([cell.key for cell in cells]))
        return 0
    if args.samples < 1 or args.threads < 1:
        print("error: --samples and --threads must be at least 1", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=logging.WARNING if args.verbose else logging.ERROR,
        format="%(levelname)s %(name)s: %(message)s",
    )
    settings = TimingSettings(
        samples=args.samples,
        warmup_s=args.warmup,
        min_sample_s=args.min_sample_time,
        threads=args.threads,
        flush_l2=not args.no_l2_flush,
    )
    results, interrupted = _run_cells(cells, settings)

    from runner.environment import RunContext

    context = RunContext.collect()
    records = [record for result in results for record in result.records(context)]
    print(table(results))
    if args.csv:
        write_csv(args.csv, results)
        print(f"CSV written to {args.csv}")
    stopped = (f"{len(results)} of {len(cells)} cells finished, outputs hold those; "
               "nothing uploaded") if interrupted else ""
    return finish(args, records, Counter(result.status for result in results), stopped)


def _run_family(data: Any, args: argparse.Namespace) -> int:
    """A spec of another family: its cells run in order through runner.families."""
    family, planned = families.plan(data, str(args.spec))
    if args.dry_run:
        print(_listing([cell.key for cell in planned]))
        return 0
    if args.csv:
        raise SpecError(str(args.spec), [f"--csv: only for quantization specs, not {family.NAME}"])
    from runner.environment import RunContext

    context, state = RunContext.collect(), {}
    records, counts = [], Counter()
    for number, cell in enumerate(planned, 1):
        outcome = family.run(cell.cell, {}, state, context)
        counts[outcome.status] += 1
        records += outcome.records
        why = f"  {outcome.error.strip().splitlines()[-1]}" if outcome.error else ""
        print(f"{number:5d}/{len(planned)}  {outcome.status:7s}  {cell.key}{why}", flush=True)
    return finish(args, records, counts)


def _listing(keys: list[str]) -> str:
    lines = [f"{i:5d}  {key}" for i, key in enumerate(keys, 1)]
    return "\n".join([*lines, f"{len(keys)} cells"])


def interrupt(_signum: int, _frame: Any) -> NoReturn:
    """A SIGTERM handler: stop like Ctrl-C, so what finished is still written."""
    raise KeyboardInterrupt


def _run_cells(cells: list[Cell], settings: TimingSettings) -> tuple[list[CellResult], bool]:
    """Run cells under a progress bar; Ctrl-C or SIGTERM stops after what has finished."""
    from tqdm import tqdm

    from runner.quant.execute import run_spec

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
