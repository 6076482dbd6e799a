"""`python -m runner instructions`: count instructions of the built-in definitions (or a
spec's) with callgrind in parallel workers, print a table, write and upload records.

torch is imported only by the workers, so `--list` works with PyYAML alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from runner.cli.outputs import INTERRUPTED_EXIT, interrupt, upload_and_status, write_json
from runner.cli.progress import Progress
from runner.cli.upload import add_upload_options, missing_token
from runner.contract.status import FAILED, OK
from runner.engine.run_context import RunContext
from runner.engine.run_settings import settings_problems
from runner.engine.specs import SpecError, family_name, read_spec
from runner.instructions.callgrind import Measurement, MeasureSettings, Pool
from runner.instructions.family import NAME as FAMILY
from runner.instructions.records import measurement_records
from runner.instructions.spec import parse_spec


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "instructions",
        help="count instructions of small PyTorch programs with callgrind",
        description=(
            "Count the instructions of the built-in definitions (or those a `family: "
            "instructions` spec selects and defines) in every runtime mode, autograd mode and "
            "thread count, with callgrind, in worker processes pinned to cores. Prints a "
            "table and writes PyTorch OSS benchmark records."
        ),
    )
    parser.add_argument("--spec", type=Path, metavar="FILE",
                        help="a `family: instructions` spec (default: every built-in one)")
    parser.add_argument("--filter", metavar="REGEX",
                        help="only benchmarks whose key (shown by --list) matches")
    parser.add_argument("--list", action="store_true", help="list the benchmarks, count none")
    allowed = len(os.sched_getaffinity(0))
    parser.add_argument("--workers", type=int, default=allowed,
                        help="worker processes, each pinned to one allowed core "
                             "(default: all %(default)s allowed cores)")
    for name in ("number", "repeats", "timeout_s", "retries"):
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, type=float
                            if name == "timeout_s" else int,
                            help=f"override the spec's {name} (default "
                                 f"{getattr(MeasureSettings, name):g})")
    parser.add_argument("-o", "--output", type=Path, help="write the records (JSON list) here")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bar (there is none when stderr is not a terminal: a "
                             "line per benchmark instead) and no line per benchmark; failures "
                             "and the table still print")
    add_upload_options(parser)
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if missing_token(args):
        return 2
    try:
        spec = parse_spec(_spec_data(args.spec), str(args.spec or "built-in definitions"),
                          extra_filter=args.filter)
        overrides = {name: getattr(args, name) for name in MeasureSettings.names()
                     if getattr(args, name, None) is not None}
        if settings_problems(overrides, MeasureSettings):
            raise SpecError("options", settings_problems(overrides, MeasureSettings))
        settings = dataclasses.replace(spec.settings, **overrides)
    except SpecError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.list:
        print("\n".join([*(f"{i:5d}  {b.key}" for i, b in enumerate(spec.benchmarks, 1)),
                         f"{len(spec.benchmarks)} benchmarks"]))
        return 0
    try:
        pool = Pool(min(args.workers, len(spec.benchmarks)))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    started, total = time.monotonic(), len(spec.benchmarks)
    done = Counter()
    print(f"counting {total} benchmarks in {len(pool.cpus)} workers on cores {pool.cpus}",
          flush=True)
    previous = signal.signal(signal.SIGTERM, interrupt)  # stop the workers on SIGTERM too
    try:
        with Progress(total, "benchmark", quiet=args.quiet) as progress:

            def ended(result: Measurement) -> None:
                done[result.status] += 1
                why = f"  {result.error.strip().splitlines()[-1]}" if result.error else ""
                progress.item(f"{sum(done.values()):5d}/{total}  {result.status:7s}  "
                              f"{result.benchmark.key}{why}", failed=result.status == FAILED,
                              status=", ".join(f"{n} {state}" for state, n in done.items()))

            results = pool.run(spec.benchmarks, settings, on_result=ended)
    except KeyboardInterrupt:
        print("interrupted: nothing written or uploaded", file=sys.stderr)
        return INTERRUPTED_EXIT
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(table(results))
    print(", ".join(f"{count} {status}" for status, count in done.items())
          + f" in {time.monotonic() - started:.0f} s")

    context = RunContext.collect()
    records = [record for result in results for record in measurement_records(result, context)]
    if args.output:
        write_json(args.output, records)
        print(f"{len(records)} records written to {args.output}")
    return upload_and_status(records, args, failed=done[FAILED] > 0)


def _spec_data(path: Path | None) -> dict:
    """The spec without its `family` key; {} (every built-in definition) without a spec."""
    if path is None:
        return {}
    data = read_spec(path)
    family = family_name(data)
    if family != FAMILY:
        raise SpecError(str(path), [f"family: {family!r}; this command runs `family: "
                                    f"{FAMILY}` specs (others: python -m runner run)"])
    return {key: value for key, value in data.items() if key != "family"}


def table(results: list[Measurement]) -> str:
    width = max((len(r.benchmark.key) for r in results), default=9)
    lines = [f"{'benchmark':{width}}  {'status':7}  {'instr/call':>12}  {'spread':>7}  "
             f"{'wall us':>9}  {'seconds':>7}"]
    for result in results:
        key = f"{result.benchmark.key:{width}}  {result.status:7}"
        if result.status != OK:
            lines.append(key)
            continue
        lines.append(f"{key}  {statistics.median(result.per_call):12,.0f}  {result.spread:7.2%}  "
                     f"{statistics.median(result.wall_us):9.2f}  {result.seconds:7.1f}")
    return "\n".join(lines)
