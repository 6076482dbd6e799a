"""A counting worker: `python -m runner.instructions.worker [--cpu N]`.

Says it is ready once torch is imported, then reads one task per line on stdin
({"benchmark": ..., "settings": ...}) and answers each with one JSON line. Whatever else
would be written to stdout (by the benchmarked code, torch or valgrind) goes to stderr, so
it cannot break the replies.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import traceback

from runner.contract.status import FAILED
from runner.instructions.callgrind import MeasureSettings
from runner.instructions.definitions import Benchmark

ADDR_NO_RANDOMIZE = 0x0040000  # personality(2) flag, as `setarch -R` sets it


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.instructions.worker")
    parser.add_argument("--cpu", type=int, help="pin this worker (and valgrind) to this core")
    args = parser.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    _fixed_addresses()
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    from runner.instructions.measure import measure  # torch: after stdout is redirected

    replies.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        try:
            task = json.loads(line)
            reply = measure(Benchmark.from_dict(task["benchmark"]),
                            MeasureSettings(**task["settings"]))
        except Exception:
            reply = {"status": FAILED, "error": traceback.format_exc(), "retry": False}
        replies.write(json.dumps(reply) + "\n")
    return 0


def _fixed_addresses() -> None:
    """Programs this process starts (valgrind) get the same address layout every run: with
    randomised layouts the count of one program moved by up to 1.6% from run to run, without
    them it repeated exactly. Left as it is where the system refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    current = libc.personality(0xFFFFFFFF)  # query
    if current != -1:
        libc.personality(current | ADDR_NO_RANDOMIZE)


if __name__ == "__main__":
    sys.exit(main())
