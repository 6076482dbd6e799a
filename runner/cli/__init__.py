"""`python -m runner`: one sub-command per module, each registering its own parser."""

from __future__ import annotations

import argparse

# The runner's command line: nothing outside runner.cli (and runner.__main__) imports it, so a
# worker runs cells through runner.families and runner.engine only (import-linter checks).
# The families' own sub-commands are here too (compilers, instructions, kernels; quant is the
# quantization part of `run`).
from runner.cli import compilers, gate, instructions, kernels, run, upload


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m runner", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    compilers.add_parser(commands)
    gate.add_parser(commands)
    instructions.add_parser(commands)
    kernels.add_parser(commands)
    run.add_parser(commands)
    upload.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
