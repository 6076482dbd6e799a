"""`python -m runner run SPEC.yml`: run a benchmark spec of any family, write and upload records.

A torchao quantization config (no `family:` key) runs through runner.cli.quant, with a
progress bar, a results table and torchao-style CSV; a spec of another family runs its cells
in turn through runner.families. torch is imported only once cells are about to run, so
`--dry-run` (and the other sub-commands) work with PyYAML alone.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from runner import families
from runner.cli import quant as quantization
from runner.cli.outputs import finish, listing
from runner.cli.upload import add_upload_options, missing_token
from runner.engine.run_context import RunContext
from runner.engine.selection import select
from runner.engine.specs import DEFAULT_FAMILY, SpecError, family_name, read_spec


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
    parser.add_argument("--dry-run", action="store_true", help="list the cells, run nothing")
    parser.add_argument("--cells", metavar="REGEX",
                        help="run only the cells whose key the regular expression matches "
                             "(re.search; '^KEY$' for one cell, as the site's pages show)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log tracebacks of failures")
    add_upload_options(parser)
    quantization.add_options(parser)
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if missing_token(args):
        return 2
    try:
        data = read_spec(args.spec)
        if family_name(data) == DEFAULT_FAMILY:
            return quantization.run_spec(data, args)
        return _run_family(data, args)
    except SpecError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _run_family(data: Any, args: argparse.Namespace) -> int:
    """A spec of another family: its cells run in order through runner.families."""
    family, planned = families.plan(data, str(args.spec))
    planned = select(planned, args.cells, str(args.spec))
    if args.dry_run:
        print(listing([cell.key for cell in planned]))
        return 0
    if args.csv:
        raise SpecError(str(args.spec), [f"--csv: only for quantization specs, not {family.NAME}"])
    context, state = RunContext.collect(), {}
    records, counts = [], Counter()
    for number, cell in enumerate(planned, 1):
        outcome = family.run(cell.cell, {}, state, context, Path.cwd())
        counts[outcome.status] += 1
        records += outcome.records
        why = f"  {outcome.error.strip().splitlines()[-1]}" if outcome.error else ""
        print(f"{number:5d}/{len(planned)}  {outcome.status:7s}  {cell.key}{why}", flush=True)
    return finish(args, records, counts)
