"""The command-line options that set runner.engine.timing_data.TimingSettings, shared by
the sub-commands that time calls (`python -m runner run`, `kernels`) and the site's
`manage.py bench run`."""

from __future__ import annotations

import argparse
from typing import Any

from runner.engine.timing_data import GPU_METHODS, TimingSettings

# Command-line options of the sub-commands that time calls: flag -> (field, help).
OPTIONS = {
    "--samples": ("samples", "timed samples of a lone measurement"),
    "--warmup": ("warmup_s", "least warm-up time per side, seconds"),
    "--min-sample-time": ("min_sample_s", "CPU: least time per sample or block, seconds"),
    "--threads": ("threads", "CPU: torch threads while timing"),
    "--min-gpu-block-time": ("min_gpu_block_s", "CUDA: least GPU time per block, seconds"),
    "--ci-target": ("ci_target", "speedups: stop once the 95%% CI half-width is at most "
                    "this fraction of the speedup"),
    "--budget": ("budget_s", "speedups: time budget for the pairs of one speedup, seconds"),
    "--min-pairs": ("min_pairs", "speedups: least interleaved pairs"),
    "--max-pairs": ("max_pairs", "speedups: most interleaved pairs"),
    "--builds": ("builds", "headline speedups: independent builds, each made again (and "
                 "compiled afresh) and timed (0: 2 eager, 2 compiled on CUDA, 1 on CPU)"),
    "--resolution": ("resolution", "headline speedups over builds: least CI half-width, a "
                     "fraction of the speedup; builds closer than this agree"),
    "--cell-budget": ("cell_budget_s", "wall time of one cell, compiles included, seconds "
                      "(as much again for each later build)"),
}


def add_timing_options(parser: argparse.ArgumentParser) -> None:
    """The timing options; each left out keeps the spec's value, else the default."""
    group = parser.add_argument_group("timing")
    defaults = TimingSettings()
    for flag, (name, text) in OPTIONS.items():
        kind = int if isinstance(getattr(defaults, name), int) else float
        group.add_argument(flag, dest=name, type=kind, metavar=kind.__name__.upper(),
                           help=f"{text} (default: {getattr(defaults, name)})")
    group.add_argument("--gpu-method", dest="gpu_method", choices=GPU_METHODS,
                       help="CUDA: time blocks as CUDA graph replays (batched where the call "
                       "cannot be captured), batched calls, or each call alone "
                       f"(default: {defaults.gpu_method})")
    group.add_argument("--no-l2-flush", dest="flush_l2", action="store_false", default=None,
                       help="CUDA per_call: keep L2 warm between timed calls")
    group.add_argument("--rotate-weights", dest="rotate_weights", action="store_true",
                       default=None, help="CUDA cuda_graph: time calls cold over copies of "
                       "each model, back to back, instead of evicting L2 before each call")


def timing_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The TimingSettings fields the options set."""
    names = [name for name, _ in OPTIONS.values()] + ["gpu_method", "flush_l2",
                                                      "rotate_weights"]
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}
