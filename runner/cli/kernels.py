"""`python -m runner kernels`: list the kernels and backends, or run some without a spec file.

    python -m runner kernels --list
    python -m runner kernels rms_norm softmax --backend eager compiled liger \\
        --shape 32768x4096 --shape 32768x16384 --device cuda -o kernels.json

The options become a `family: kernels` spec (runner.kernels.spec), so they are validated
and run exactly as a spec file or a job would be.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from runner.cli.outputs import finish, status_counts
from runner.cli.timing_options import add_timing_options, timing_overrides
from runner.cli.upload import add_upload_options, missing_token
from runner.contract.status import OK
from runner.engine.run_context import RunContext
from runner.engine.specs import SpecError
from runner.kernels.backends import BACKENDS, COMPILE_MODES
from runner.kernels.definitions import DIRECTIONS, DTYPES, KERNELS
from runner.kernels.records import cell_records
from runner.kernels.results import KernelResult
from runner.kernels.spec import DEFAULT_COMPILE_MODE, DEVICES, parse

DEFAULT_SHAPES = {"cuda": ["32768x1024", "32768x4096", "32768x16384"],
                  "cpu": ["1024x1024", "4096x1024"]}


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "kernels",
        help="fused-kernel layers: latency, GB/s and speedup per backend",
        description=("Time cross entropy, softmax, RMSNorm and LayerNorm (forward and "
                     "backward) on eager, torch.compile, Liger and Quack; check each against "
                     "eager (gradients included) and write PyTorch OSS benchmark records."),
    )
    parser.add_argument("kernels", nargs="*", metavar="NAME",
                        help=f"kernels to run (default: all): {', '.join(KERNELS)}")
    parser.add_argument("--list", action="store_true",
                        help="list kernels, byte counts and backends available here")
    parser.add_argument("--direction", nargs="+", choices=DIRECTIONS, default=list(DIRECTIONS))
    parser.add_argument("--backend", nargs="+", default=["eager", "compiled"],
                        metavar="BACKEND", help=f"of {', '.join(BACKENDS)} (default: "
                        "eager compiled)")
    parser.add_argument("--compile-mode", nargs="+", default=[DEFAULT_COMPILE_MODE],
                        metavar="MODE", help=f"for `compiled`: {', '.join(COMPILE_MODES)} "
                        "(default: %(default)s)")
    parser.add_argument("--shape", action="append", metavar="MxN",
                        help="a shape (repeat the option); default by device: "
                        + "; ".join(f"{d} {' '.join(s)}" for d, s in DEFAULT_SHAPES.items()))
    parser.add_argument("--device", choices=DEVICES,
                        help="default: cuda when available, else cpu")
    parser.add_argument("--dtype", choices=DTYPES, default="bfloat16")
    parser.add_argument("--atol", type=float, help="accuracy tolerance, with --rtol "
                        "(default: an rtol per dtype, atol scaled to each tensor's magnitude)")
    parser.add_argument("--rtol", type=float)
    parser.add_argument("-o", "--output", type=Path, help="write the records (JSON list) here")
    add_timing_options(parser)
    add_upload_options(parser)
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.list:
        print(listing(args.device))
        return 0
    if missing_token(args):
        return 2
    try:
        cells = parse(spec_of(args), "command line")
    except SpecError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    from runner.kernels.execute import run_cell  # torch: only once cells run

    context = RunContext.collect()
    results, interrupted = [], False
    try:
        for number, cell in enumerate(cells, 1):
            results.append(run_cell(cell, cell.timing_settings()))
            print(f"{number:5d}/{len(cells)}  {results[-1].status:7s}  {cell.key}",
                  file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        interrupted = True
    records = [record for result in results for record in cell_records(result, context)]
    print(table(results))
    stopped = f"{len(results)} of {len(cells)} cells finished; nothing uploaded" \
        if interrupted else ""
    return finish(args, records, status_counts(results), stopped)


def spec_of(args: argparse.Namespace) -> dict[str, Any]:
    """The spec the options describe."""
    device = args.device or _default_device()
    spec: dict[str, Any] = {
        "kernels": args.kernels or list(KERNELS),
        "directions": args.direction,
        "backends": args.backend,
        "shapes": args.shape or DEFAULT_SHAPES[device],
        "dtype": args.dtype,
        "device": device,
        "timing": timing_overrides(args),
    }
    if "compiled" in args.backend:
        spec["compile_modes"] = args.compile_mode
    if args.atol is not None or args.rtol is not None:
        spec["tolerance"] = {"atol": args.atol, "rtol": args.rtol}
    return spec


def listing(device: str | None) -> str:
    device = device or _default_device()
    lines = ["kernels (s: bytes per element of the dtype):"]
    for kernel in KERNELS.values():
        lines.append(f"  {kernel.name:14s} {kernel.title}")
        lines += [f"    {direction:9s} {kernel.formula(direction)}" for direction in DIRECTIONS]
    lines.append(f"backends on {device}:")
    for backend in BACKENDS.values():
        problem = backend.unavailable(device)
        version = backend.version()
        state = f"unavailable: {problem}" if problem else "available" + (
            f" ({backend.distribution} {version})" if version else "")
        modes = f"; compile modes {', '.join(COMPILE_MODES)}" if backend.compiles else ""
        lines.append(f"  {backend.name:10s} {state}{modes}")
    return "\n".join(lines)


def table(results: list[KernelResult]) -> str:
    """One line per cell: its numbers, or why it has none."""
    header = (f"{'kernel':14s} {'direction':9s} {'shape':>12s} {'backend':34s} "
              f"{'ms':>9s} {'GB/s':>9s} {'speedup':>8s}  accuracy / status")
    lines = [header]
    for result in results:
        cell = result.cell
        numbers = ("", "", "")
        if result.timing is not None:
            numbers = (f"{result.timing.median_ms:.4f}", f"{result.gbps:.1f}",
                       "" if result.speedup is None else f"{result.speedup:.2f}x")
        state = result.accuracy or ""
        if result.unstable:
            state += ", unstable speedup"
        if result.status != OK:
            reason = result.reason.splitlines()[0] if result.reason else ""
            state = f"{state + ', ' if state else ''}{result.status}: {reason}"
        lines.append(f"{cell.kernel:14s} {cell.direction:9s} {cell.shape:>12s} "
                     f"{cell.label:34s} {numbers[0]:>9s} {numbers[1]:>9s} {numbers[2]:>8s}  "
                     f"{state}")
    return "\n".join(lines)


def _default_device() -> str:
    import torch  # only to pick a default device: --list and spec errors need no torch

    return "cuda" if torch.cuda.is_available() else "cpu"
