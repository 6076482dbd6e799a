"""`python -m runner`: one sub-command per module, each registering its own parser."""

from __future__ import annotations

import argparse

from runner import gate, run, upload
from runner.compilers import cli as compilers
from runner.instructions import cli as instructions
from runner.kernels import cli as kernels


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
