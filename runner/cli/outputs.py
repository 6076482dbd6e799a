"""How the sub-commands that run cells end, for every family: the records file, the counts
by status, the upload and the exit status."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

from runner.cli.upload import upload_from_cli
from runner.contract.status import FAILED, OK
from runner.engine.folders import write_atomically

INTERRUPTED_EXIT = 130  # what a shell reports after Ctrl-C


def interrupt(_signum: int, _frame: Any) -> NoReturn:
    """A SIGTERM handler: stop like Ctrl-C, so what finished is still written."""
    raise KeyboardInterrupt


def listing(keys: list[str]) -> str:
    """The cells a dry run would run, numbered."""
    lines = [f"{i:5d}  {key}" for i, key in enumerate(keys, 1)]
    return "\n".join([*lines, f"{len(keys)} cells"])


def write_json(path: Path, records: list[dict[str, Any]]) -> None:
    write_atomically(path, lambda handle: json.dump(records, handle, indent=1, allow_nan=False))


def status_counts(results: Iterable[Any]) -> Counter:
    """Cells by status; an ok cell counted as "suspect" when its numbers make no sense (a
    quantization cell's `suspect`), else as "unstable" when its speedup stayed unstable."""
    return Counter(_counted_as(result) for result in results)


def _counted_as(result: Any) -> str:
    if result.status != OK:
        return result.status
    if getattr(result, "suspect", None):
        return "suspect"
    return "unstable" if result.unstable else OK


def finish(args: argparse.Namespace, records: list[dict[str, Any]], counts: Counter,
           interrupted: str = "") -> int:
    """Write the records (`-o`) and print the counts; then, unless `interrupted` says what
    stopped, upload (`--upload`)."""
    if args.output:
        write_json(args.output, records)
        print(f"{len(records)} records written to {args.output}")
    print(", ".join(f"{count} {status}" for status, count in counts.items()) or "no cells ran")
    if interrupted:
        print(f"interrupted: {interrupted}", file=sys.stderr)
        return INTERRUPTED_EXIT
    return upload_and_status(records, args, failed=counts[FAILED] > 0)


def upload_and_status(records: list[dict[str, Any]], args: argparse.Namespace,
                      failed: bool) -> int:
    """Upload when `--upload` is given; the exit status: 1 when it or a cell failed."""
    if args.upload and not upload_from_cli(records, args):
        return 1
    return 1 if failed else 0
