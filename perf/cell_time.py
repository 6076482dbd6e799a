"""Wall time per quantization cell: the runner's paired cell against torchao's way, on small
layers (below 0.5 ms a call), in the same run.

    .venv/bin/python perf/cell_time.py [--repeats 3] [--compile] [--shapes 16x256x256,...]
        [--load N]

Both sides do a whole cell of a torchao microbenchmark config: build the layer, copy it,
apply the recipe, (compile,) and time. Ours is `runner.quant.execute.run_cell` with the
default timing settings: the baseline and the quantized model timed together in interleaved
blocks until the speedup's 95% interval is within 2% (runner.engine.paired), so one cell gives the
speedup and its interval. torchao's runner times one model per cell with
torch.utils.benchmark.Timer (one thread, 100 warm-up calls, then the mean of 100 calls),
so its speedups need the baseline recipe's cell too, once per shape: per speedup, its
baseline cell is shared among the config's other recipes of that shape (with R of them,
a speedup costs its cell plus 1/R of the baseline cell). Ours times the bf16 baseline again
in every cell (that is what pairs it); our baseline cell is the run's A/A sanity check (a
speedup of bf16 over itself, with its interval), which torchao's runner does not give, so
it is shown apart and left out of the per-speedup median (the whole config counts it).
The cells alternate (ours, then torchao's) so load changes hit both alike. It prints
seconds per cell for each, how our cell ended (pairs, interval half-width, what stopped
it), the ratio per speedup, the whole config's totals, and the load average.
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch.utils.benchmark import Timer  # noqa: E402

from perf.competing_load import competing, loadavg  # noqa: E402
from runner.quant import models  # noqa: E402
from runner.quant.cells import QuantCell, Shape  # noqa: E402
from runner.quant.execute import run_cell  # noqa: E402

SHAPES = "16x256x256,32x512x512,64x512x1024"
RECIPES = ("baseline", "int8wo", "int8dq")
TORCHAO_CALLS = 100


def torchao_cell(cell: QuantCell) -> float:
    """torchao's runner's cell, timed as a whole: seconds."""
    started = time.perf_counter()
    gc.collect()
    recipe = cell.recipe()
    base, data = models.build(cell.model_type, cell.shape.m, cell.shape.k, cell.shape.n,
                              getattr(torch, cell.dtype), cell.device)
    model = copy.deepcopy(base).eval()
    recipe.apply(model, recipe.build())
    if cell.compile_mode:
        model = torch.compile(model, mode=cell.compile_mode, fullgraph=True)
    with torch.no_grad():
        timer = Timer(stmt="model(data)", globals={"model": model, "data": data},
                      num_threads=1)
        timer.timeit(number=TORCHAO_CALLS)  # its warm-up
        timer.timeit(number=TORCHAO_CALLS)  # its measurement (torchao reports the mean)
    return time.perf_counter() - started


def ours(cell: QuantCell) -> tuple[float, str]:
    """Our cell, timed as a whole: seconds, and how its timing ended."""
    started = time.perf_counter()
    result = run_cell(cell)
    seconds = time.perf_counter() - started
    assert result.status == "ok", result.reason
    paired = result.eager
    return seconds, f"{paired.pairs:3d} pairs ±{paired.half_width:5.1%} {paired.stopped}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compile", action="store_true", help="compiled cells (mode default)")
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--load", type=int, default=0,
                        help="competing CPU-bound processes the script runs meanwhile")
    args = parser.parse_args()
    with competing(args.load):
        measure(args)


def measure(args: argparse.Namespace) -> None:
    shapes = [Shape("custom", *map(int, text.split("x"))) for text in args.shapes.split(",")]
    mode = "default" if args.compile else None
    print(f"load average at start {loadavg()}, {os.cpu_count()} CPUs, {args.load} competing "
          "processes started by this script")
    rows = []
    for shape in shapes:
        for recipe in RECIPES:
            cell = QuantCell("cell_time", recipe, None, shape, "linear", "bfloat16", "cpu",
                             mode, "results/cell_time")
            ours(cell), torchao_cell(cell)  # first use of the recipe: imports, kernels
            mine, theirs, ends = [], [], []
            for _ in range(args.repeats):
                seconds, end = ours(cell)
                mine.append(seconds)
                ends.append(end)
                theirs.append(torchao_cell(cell))
            rows.append((shape, recipe, statistics.median(mine), statistics.median(theirs)))
            print(f"  {shape.m}x{shape.k}x{shape.n} {recipe:9s} ours {rows[-1][2]:6.3f} s  "
                  f"torchao {rows[-1][3]:6.3f} s   ours ended: {'; '.join(ends)}", flush=True)
    by_shape: dict[Shape, dict[str, tuple[float, float]]] = {}
    for shape, recipe, mine, theirs in rows:
        by_shape.setdefault(shape, {})[recipe] = (mine, theirs)
    print(f"\n{'shape':14s} {'recipe':9s} {'ours s/cell':>11s} {'torchao s/cell':>14s} "
          f"{'torchao s/speedup':>17s} {'ours/torchao':>12s}")
    ratios = []
    for shape, cells in by_shape.items():
        baseline_theirs = cells["baseline"][1]
        speedups = len(cells) - 1
        for recipe, (mine, theirs) in cells.items():
            if recipe == "baseline":  # our A/A sanity check; torchao gives no speedup here
                print(f"{shape.m}x{shape.k}x{shape.n:<6d} {recipe:9s} {mine:11.3f} "
                      f"{theirs:14.3f} {'(A/A check)':>17s} {'-':>12s}")
                continue
            per_speedup = theirs + baseline_theirs / speedups
            ratios.append(mine / per_speedup)
            print(f"{shape.m}x{shape.k}x{shape.n:<6d} {recipe:9s} {mine:11.3f} {theirs:14.3f} "
                  f"{per_speedup:17.3f} {mine / per_speedup:12.2f}")
    total_mine = sum(m for cells in by_shape.values() for m, _ in cells.values())
    total_theirs = sum(t for cells in by_shape.values() for _, t in cells.values())
    print(f"\nwhole config ({len(rows)} cells, {'compiled' if mode else 'eager'}): ours "
          f"{total_mine:.2f} s, torchao {total_theirs:.2f} s, ratio {total_mine / total_theirs:.2f}"
          f"; median ours/torchao per speedup {statistics.median(ratios):.2f}")
    print(f"load average at end {loadavg()}")


if __name__ == "__main__":
    main()
