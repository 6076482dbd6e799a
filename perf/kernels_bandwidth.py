"""Achieved memory bandwidth of the fused-kernel layers, and on CUDA its share of the peak.

Runs the kernels family (runner.kernels) on the available device and prints, per kernel,
direction, shape and backend: median latency, GB/s (the least bytes a fused kernel moves,
runner/kernels/definitions.py, over that latency), the share of the device's peak DRAM
bandwidth (CUDA, from the table below; CPUs print GB/s only) and the speedup over eager;
then the best GB/s per kernel and the geomean speedup per backend.

    .venv/bin/python perf/kernels_bandwidth.py [--device cpu] [--shape 4096x4096 ...]
"""

from __future__ import annotations

import argparse
import logging
import math
import re
import sys
from collections import defaultdict

from runner.engine.timing_data import TimingSettings
from runner.kernels.backends import BACKENDS
from runner.kernels.definitions import DTYPES, KERNELS
from runner.kernels.spec import parse

# Peak DRAM bandwidth (GB/s) by device name, most specific first: vendors' data sheets.
PEAK_GBPS = (
    (r"GH200", 4000),
    (r"H200", 4800),
    (r"H100 NVL", 3900),
    (r"H100 PCIe", 2000),
    (r"H100", 3350),  # SXM ("NVIDIA H100 80GB HBM3")
    (r"B200", 8000),
    (r"A100 80GB PCIe", 1935),
    (r"A100-SXM4-80GB|A100 80GB", 2039),
    (r"A100", 1555),  # 40 GB
    (r"L40S|L40\b", 864),
    (r"\bL4\b", 300),
)
SHAPES = {"cuda": ["32768x1024", "32768x4096", "32768x16384"],
          "cpu": ["1024x1024", "4096x1024"]}


def peak_gbps(device_name: str) -> float | None:
    return next((peak for pattern, peak in PEAK_GBPS if re.search(pattern, device_name)), None)


def main() -> int:
    import torch

    cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if cuda else "cpu")
    parser.add_argument("--kernel", nargs="+", choices=list(KERNELS), default=list(KERNELS))
    parser.add_argument("--backend", nargs="+", choices=list(BACKENDS),
                        help="default: eager, compiled and every optional backend that can "
                        "run here")
    parser.add_argument("--shape", nargs="+", metavar="MxN")
    parser.add_argument("--dtype", choices=DTYPES,
                        help="default: bfloat16 on CUDA, float32 on CPU")
    parser.add_argument("--compile-mode", default=None,
                        help="default: max-autotune-no-cudagraphs on CUDA, default on CPU")
    parser.add_argument("--samples", type=int, default=TimingSettings().samples)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)

    device = args.device
    backends = args.backend or [name for name, backend in BACKENDS.items()
                                if not backend.unavailable(device)]
    spec = {"kernels": args.kernel, "backends": backends, "device": device,
            "shapes": args.shape or SHAPES[device],
            "dtype": args.dtype or ("bfloat16" if device == "cuda" else "float32"),
            "timing": {"samples": args.samples}}
    if "compiled" in backends:
        spec["compile_modes"] = [args.compile_mode or (
            "max-autotune-no-cudagraphs" if device == "cuda" else "default")]
    from runner.kernels.execute import run_cell

    cells = parse(spec, "command line")
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    peak = peak_gbps(name) if device == "cuda" else None
    threads = TimingSettings().threads
    print(f"{name}, torch {torch.__version__}, {spec['dtype']}, {len(cells)} cells"
          + (f", peak {peak:.0f} GB/s" if peak else ", peak unknown: GB/s only" if cuda
             else f", {threads} thread(s): GB/s only"))
    print(f"{'kernel':14s} {'direction':9s} {'shape':>12s} {'backend':36s} {'ms':>9s} "
          f"{'GB/s':>8s} {'of peak':>8s} {'speedup':>8s}")
    best: dict[tuple[str, str], tuple[float, str]] = {}
    speedups: dict[str, list[float]] = defaultdict(list)
    for cell in cells:
        result = run_cell(cell, TimingSettings(**cell.timing))
        if result.timing is None:
            print(f"{cell.kernel:14s} {cell.direction:9s} {cell.shape:>12s} {cell.label:36s} "
                  f"{result.status}: {result.reason.splitlines()[0] if result.reason else ''}")
            continue
        gbps = result.gbps
        share = f"{gbps / peak:8.1%}" if peak else f"{'':8s}"
        speedup = f"{result.speedup:7.2f}x" if result.speedup is not None else f"{'':8s}"
        print(f"{cell.kernel:14s} {cell.direction:9s} {cell.shape:>12s} {cell.label:36s} "
              f"{result.timing.median_ms:9.4f} {gbps:8.1f} {share} {speedup}", flush=True)
        key = (cell.kernel, cell.direction)
        if gbps > best.get(key, (0.0, ""))[0]:
            best[key] = (gbps, f"{cell.label} at {cell.shape}")
        if result.speedup is not None:
            speedups[cell.label].append(result.speedup)
    print("\nbest GB/s per kernel and direction:")
    for (kernel, direction), (gbps, where) in best.items():
        share = f" ({gbps / peak:.1%} of peak)" if peak else ""
        print(f"  {kernel:14s} {direction:9s} {gbps:8.1f} GB/s{share}  {where}")
    print("geomean speedup over eager:")
    for label, values in speedups.items():
        geomean = math.exp(sum(math.log(v) for v in values) / len(values))
        print(f"  {label:36s} {geomean:.2f}x over {len(values)} cells")
    return 0


if __name__ == "__main__":
    sys.exit(main())
