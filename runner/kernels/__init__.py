"""Fused-kernel layer benchmarks: latency, memory bandwidth, speedup over eager, accuracy.

    definitions  kernels, their tensors and byte counts (no torch)
    backends     eager, torch.compile, Liger, Quack (torch imported when building)
    spec         `family: kernels` specs into cells (no torch)
    execute      one cell: accuracy against eager, then timing
    results      what a cell produced (no torch)
    records      a result as OSS v3 records
    family       the runner.families interface, its benchmark name and metric directions

Its command line, `python -m runner kernels`, is runner.cli.kernels.
"""
