"""`python -m runner compilers`: run the model experiment matrix, seed 001's way.

Writes OUTPUT/results.jsonl (one line per configuration, with its verification code) and
OUTPUT/records.json (OSS records of every configuration the file holds, resumed ones
included), and uploads the records with --upload. A run resumes: configurations already in
results.jsonl (whatever their outcome) are skipped; --no-resume starts the file over.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from runner.cli.outputs import INTERRUPTED_EXIT, upload_and_status, write_json
from runner.cli.progress import Progress
from runner.cli.upload import add_upload_options, missing_token
from runner.compilers import family, records, results
from runner.compilers.matrix import BACKENDS, DTYPES, EAGER, TESTS, Config
from runner.compilers.spec import DEFAULTS, parse
from runner.contract.status import FAILED
from runner.engine.run_context import RunContext
from runner.engine.specs import SpecError

RECORDS = "records.json"


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "compilers", help="run the model experiment matrix (models x backends x tests)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    pick = parser.add_argument_group("what runs")
    pick.add_argument("--model", action="append", metavar="ENTRY",
                      help="a suite (builtin, torchbench), a built-in model, torchbench/NAME or "
                           "module.path:factory; repeatable (default: builtin)")
    pick.add_argument("--filter", action="append", default=[], metavar="REGEX",
                      help="run models whose name matches one of these; repeatable")
    pick.add_argument("--exclude", action="append", default=[], metavar="REGEX",
                      help="skip models whose name matches; repeatable")
    pick.add_argument("--backend", action="append", metavar="NAME",
                      help=f"{', '.join(BACKENDS)} or module.path:function; repeatable "
                           f"(default: {' '.join(DEFAULTS['backends'])})")
    pick.add_argument("--test", action="append", choices=TESTS, help="repeatable (default: both)")
    pick.add_argument("--dtype", action="append", choices=DTYPES,
                      help="repeatable (default: float32)")
    pick.add_argument("--device", choices=("cpu", "cuda"),
                      help="default: cuda when available, else cpu")
    how = parser.add_argument_group("how")
    how.add_argument("--repeat", type=int, default=DEFAULTS["repeat"],
                     help="timed runs per configuration (default: %(default)s)")
    how.add_argument("--iterations-per-run", type=int, default=DEFAULTS["iterations_per_run"],
                     help="iterations per timed run (default: %(default)s)")
    how.add_argument("--batch-size", type=int, help="default: each model's own")
    how.add_argument("--threads", type=int,
                     help="CPU: torch threads (default: torch's); 1 is steadier on a busy machine")
    how.add_argument("--verify", action="store_true", help="check accuracy against eager")
    how.add_argument("--dump-pytorch-profiles", action="store_true",
                     help="a chrome trace and an op table per repetition")
    how.add_argument("--timeout", type=float, default=DEFAULTS["timeout"], metavar="SECONDS",
                     help="per configuration (default: %(default)s)")
    how.add_argument("--output-dirname", type=Path, default=Path("output"),
                     help="where results.jsonl, records.json and profiles go "
                          "(default: %(default)s)")
    how.add_argument("--no-resume", action="store_true",
                     help="start results.jsonl over instead of skipping what it holds")
    how.add_argument("--dry-run", action="store_true", help="list the configurations only")
    how.add_argument("-q", "--quiet", action="store_true",
                     help="no progress bar (there is none when stderr is not a terminal: a "
                          "line per configuration instead) and no line per configuration; "
                          "failures and the summary still print")
    add_upload_options(parser)
    parser.set_defaults(func=main)


def matrix(args: argparse.Namespace) -> list[Config]:
    """The configurations the arguments ask for, checked as a spec is (every problem listed)."""
    data = {
        "models": args.model or DEFAULTS["models"], "filter": args.filter,
        "exclude": args.exclude, "backends": args.backend or DEFAULTS["backends"],
        "tests": args.test or DEFAULTS["tests"], "dtypes": args.dtype or DEFAULTS["dtypes"],
        "device": args.device or _default_device(), "batch_size": args.batch_size,
        "repeat": args.repeat, "iterations_per_run": args.iterations_per_run,
        "verify": args.verify, "dump_pytorch_profiles": args.dump_pytorch_profiles,
        "timeout": args.timeout, "output_dir": ".",  # under --output-dirname (_run)
        "threads": args.threads,
    }
    return parse(data, "python -m runner compilers")


def main(args: argparse.Namespace) -> int:

    if missing_token(args):
        return 2
    try:
        configs = matrix(args)
    except SpecError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.dry_run or not configs:
        print("\n".join([*(f"{i:5d}  {c.key}" for i, c in enumerate(configs, 1)),
                         f"{len(configs)} configurations"]))
        return 0
    path = args.output_dirname / results.NAME
    if args.no_resume:
        path.unlink(missing_ok=True)
    try:
        done = results.read(path)
    except ValueError as error:
        print(f"error: {error}; use --no-resume or another --output-dirname", file=sys.stderr)
        return 2
    context = RunContext.collect()
    baselines = {key: line for key, line in done.items()
                 if line["experiment"]["backend"] == EAGER}
    interrupted = _run(configs, done, path, {"baselines": baselines}, context, args.quiet)
    found = _records(configs, done, baselines, context)

    write_json(args.output_dirname / RECORDS, found)
    failed = sum(1 for c in configs if "error" in done.get(c.key, {}).get("metrics", {}))
    print(f"{sum(c.key in done for c in configs)} of {len(configs)} configurations in {path}, "
          f"{failed} failed; {len(found)} records in {args.output_dirname / RECORDS}")
    if interrupted:
        print("interrupted: nothing uploaded; run again to resume", file=sys.stderr)
        return INTERRUPTED_EXIT
    return upload_and_status(found, args, failed=failed > 0)


def _run(configs: list[Config], done: dict[str, dict[str, Any]], path: Path,
         state: dict[str, Any], context: RunContext, quiet: bool) -> bool:
    """Run what `done` lacks, appending each line as it ends; True when interrupted."""
    resumed = sum(config.key in done for config in configs)
    if resumed:
        print(f"resuming: {resumed} of {len(configs)} configurations already in {path}",
              flush=True)
    counts: dict[str, int] = {}
    with Progress(len(configs), "config", quiet=quiet, done=resumed) as progress:
        for number, config in enumerate(configs, 1):
            if config.key in done:
                continue
            try:
                outcome = family.run(config.to_dict(), {}, state, context, path.parent)
            except KeyboardInterrupt:
                return True
            results.append(path, outcome.detail)
            done[config.key] = outcome.detail
            counts[outcome.status] = counts.get(outcome.status, 0) + 1
            why = f"  {outcome.error.strip().splitlines()[-1]}" if outcome.error else ""
            progress.item(f"{number:5d}/{len(configs)}  {outcome.status:7s}  {config.key}  "
                          f"{outcome.detail['verification_code']}{why}",
                          failed=outcome.status == FAILED,
                          status=", ".join(f"{n} {state}" for state, n in counts.items()))
    return False


def _records(configs: list[Config], done: dict[str, dict[str, Any]],
             baselines: dict[str, dict[str, Any]], context: RunContext) -> list[dict[str, Any]]:
    """Records of every configuration the file holds; eager lines (the matrix's, or those run
    as baselines only) give memory ratios."""
    found = []
    for config in configs:
        if config.key in done:
            baseline = done.get(config.baseline().key) or baselines.get(config.baseline().key)
            found += records.build(config, done[config.key], baseline, context)
    return found


def _default_device() -> str:
    import torch  # only to pick a default device: --dry-run and spec errors need no torch

    return "cuda" if torch.cuda.is_available() else "cpu"
