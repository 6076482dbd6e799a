"""Where a GPU cell's time goes (issue 29): what a compiled build costs under inductor's cache
policies, and what a decode-shape bf16 call reads under each way of timing it.

    python3 perf/gpu_cost_probe.py --out DIR          # one GPU, about 3 minutes
    .venv/bin/python perf/gpu_cost_probe.py --device cpu --shape 64,512,512   # a dry run

Compile (one process per policy, each with empty inductor and Triton cache folders, as
perf/gpu_check.py runs the runner): a recipe's cell (baseline and quantized model, the
runner's own models and recipes) compiled in `--builds` builds, each after a dynamo reset
as runner.quant.execute does, under
- `no-caches`: torch.compiler.config force_disable_caches (the runner's builds today);
- `fresh-picks`: inductor's FX graph, AOT autograd and autotune caches off, Triton's kernel
  cache on (on CPU, with the AOT autograd cache on, a second build loaded the first's code): a
  build generates its code and benchmarks its kernels' configs again, and reuses compiled
  kernel binaries;
- `caches`: everything cached (a later build reuses the first build's code and picks).
Each build prints its compile seconds (the first call of both models), dynamo's timed phases
in them (the dozen that took longest; they nest) and the quantized
model's time per call (CUDA graph replays, L2 warm): builds whose picks differ differ there.

Decode timing (CUDA only): a bf16 linear of --decode-shape timed as the runner can, against
its HBM bound: each call between its own events after an L2-evicting read (the runner's
cuda_graph + flushed L2), an empty graph timed the same way (what events and a replay cost),
plain calls (eager, then compiled) and the compiled call's graph each timed the same way
behind a long spin kernel (nvbench's cold measurement launches plain calls),
N weight copies larger than L2 replayed back to back in one graph (each call reads its
weight from memory, no event per call), and one weight replayed back to back (L2 warm).
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

POLICIES = ("no-caches", "fresh-picks", "caches")
BF16_BYTES = 2
REPLAYS = 200


def shape_arg(text: str) -> tuple[int, int, int]:
    m, k, n = (int(part) for part in text.split(","))
    return m, k, n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--recipe", default="int8dq")
    parser.add_argument("--shape", type=shape_arg, default=(1024, 4096, 4096), metavar="M,K,N")
    parser.add_argument("--decode-shape", type=shape_arg, default=(32, 4096, 4096),
                        metavar="M,K,N")
    parser.add_argument("--builds", type=int, default=2)
    parser.add_argument("--no-decode", action="store_true", help="leave the decode timings out")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--deadline", type=float, default=200.0, metavar="S",
                        help="seconds for the whole probe; a policy that no longer fits is "
                             "left out")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)  # a policy's process
    args = parser.parse_args()
    if args.child:
        print(json.dumps(compile_builds(args)), flush=True)
        return 0
    started = time.perf_counter()
    found: dict[str, object] = {}
    if args.device == "cuda" and not args.no_decode:
        try:
            found["decode"] = decode_timings(args.decode_shape)
        except Exception as error:  # the compile part still runs
            found["decode"] = f"{type(error).__name__}: {error}"
        print(json.dumps(found["decode"], indent=1), flush=True)
    for policy in args.policies.split(","):
        left = args.deadline - (time.perf_counter() - started)
        if left < 20:
            found[policy] = f"not run: {left:.0f} s left"
            continue
        found[policy] = run_policy(policy, args, left)
        print(policy, json.dumps(found[policy]), flush=True)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "gpu_cost_probe.json").write_text(json.dumps(found, indent=1))
    return 0


def run_policy(policy: str, args: argparse.Namespace, timeout: float) -> object:
    with tempfile.TemporaryDirectory(prefix="probe-") as folder:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": f"{folder}/inductor",
               "TRITON_CACHE_DIR": f"{folder}/triton"}
        argv = [sys.executable, __file__, "--child", policy, "--device", args.device,
                "--recipe", args.recipe, "--shape", ",".join(map(str, args.shape)),
                "--builds", str(args.builds)]
        began = time.perf_counter()
        try:
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as stopped:
            return {"error": f"stopped after {timeout:.0f} s", "out": str(stopped.stdout)[-2000:]}
        wall = time.perf_counter() - began
        if done.returncode != 0:
            return {"error": done.stderr[-3000:], "wall_s": wall}
        return {**json.loads(done.stdout.strip().splitlines()[-1]), "wall_s": round(wall, 1)}


def compile_builds(args: argparse.Namespace) -> dict[str, object]:
    """In this process: `--builds` compiled builds of the cell under one cache policy."""
    import torch

    from runner.quant import models
    from runner.quant.recipes import resolve

    policy = args.child
    if policy == "no-caches":
        torch.compiler.config.force_disable_caches = True
    elif policy == "fresh-picks":
        torch._inductor.config.fx_graph_cache = False
        torch._inductor.config.autotune_local_cache = False
        torch._functorch.config.enable_autograd_cache = False  # else it holds the FX graph
    m, k, n = args.shape
    began = time.perf_counter()
    recipe = resolve(args.recipe)
    torch.manual_seed(0)
    baseline, data = models.build("linear", m, k, n, torch.bfloat16, args.device)
    quantized = copy.deepcopy(baseline)
    recipe.apply(quantized, recipe.build())
    setup_s = time.perf_counter() - began
    builds = []
    with torch.no_grad():
        for _ in range(args.builds):
            torch._dynamo.reset()
            base, model = copy.deepcopy(baseline), copy.deepcopy(quantized)
            base = torch.compile(base, fullgraph=True)
            model = torch.compile(model, fullgraph=True)
            before = phase_seconds()
            began = time.perf_counter()
            base(data)
            model(data)
            if args.device == "cuda":
                torch.cuda.synchronize()
            compile_s = time.perf_counter() - began
            builds.append({"compile_s": round(compile_s, 2), "phases": phases_since(before),
                           "quantized_ms": round(call_ms(model, data, args.device), 5),
                           "baseline_ms": round(call_ms(base, data, args.device), 5)})
    return {"policy": policy, "recipe": args.recipe, "shape": [m, k, n],
            "setup_s": round(setup_s, 2), "builds": builds,
            "compile_times": torch._dynamo.utils.compile_times()[:1500]}


def phase_seconds() -> dict[str, float]:
    """Seconds so far in each of dynamo's timed compile phases (its compile_times)."""
    from torch._dynamo.utils import compilation_time_metrics

    return {name: sum(times) for name, times in compilation_time_metrics.items()}


def phases_since(before: dict[str, float], top: int = 12) -> dict[str, float]:
    """The `top` phases by seconds added since `before` (phases nest: they overlap)."""
    added = {name: seconds - before.get(name, 0.0) for name, seconds in phase_seconds().items()}
    ranked = sorted(added.items(), key=lambda item: item[1], reverse=True)[:top]
    return {name: round(seconds, 2) for name, seconds in ranked if seconds >= 0.01}


def call_ms(model, data, device: str) -> float:
    """Milliseconds per call: CUDA graph replays back to back (L2 warm) on CUDA, plain calls
    on CPU."""
    if device != "cuda":
        began = time.perf_counter()
        for _ in range(20):
            model(data)
        return (time.perf_counter() - began) * 1000 / 20
    return replay_ms(capture(lambda: model(data)), REPLAYS)


def capture(call):
    """A replay of `call` captured in a CUDA graph, as the runner captures one
    (runner.engine.gpu_blocks.TorchCuda)."""
    from runner.engine.gpu_blocks import TorchCuda

    replay, reason = TorchCuda().capture(call)
    if replay is None:
        raise RuntimeError(f"no CUDA graph: {reason}")
    return replay


def replay_ms(replay, replays: int) -> float:
    """Mean ms per replay of `replays` replays back to back between two events."""
    import torch

    for _ in range(10):
        replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(int(2e6))
    start.record()
    for _ in range(replays):
        replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / replays


def decode_timings(shape: tuple[int, int, int]) -> dict[str, object]:
    import torch

    from dashboards.peaks import peak_bandwidth
    from runner.engine.gpu_blocks import TorchCuda

    m, k, n = shape
    props = torch.cuda.get_device_properties(0)
    l2 = props.L2_cache_size
    weight_bytes = k * n * BF16_BYTES
    peak = peak_bandwidth(torch.cuda.get_device_name())
    bound_ms = weight_bytes / (peak.gbs * 1e9) * 1e3 if peak else None
    x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    copies = max(4, -(-4 * l2 // weight_bytes))  # together at least 4x L2
    weights = [torch.randn(n, k, dtype=torch.bfloat16, device="cuda") for _ in range(copies)]
    gpu = TorchCuda()  # its L2 flush, as the runner's timing evicts L2

    def per_call_flushed(replay, calls: int = 50) -> float:
        spans = []
        torch.cuda._sleep(int(5e7))  # ~25 ms: outlasts the host's enqueueing of 50 plain calls
        for _ in range(calls):
            gpu.flush_l2()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            replay()
            end.record()
            spans.append((start, end))
        torch.cuda.synchronize()
        times = sorted(s.elapsed_time(e) for s, e in spans)
        return times[len(times) // 2]

    plain = functools.partial(torch.nn.functional.linear, x, weights[0])
    one = capture(plain)
    compiled_linear = torch.compile(torch.nn.Linear(k, n, bias=False, dtype=torch.bfloat16,
                                                    device="cuda"), fullgraph=True)
    compiled = functools.partial(compiled_linear, x)
    compiled()
    empty_target = torch.zeros(1, device="cuda")
    empty = capture(lambda: empty_target.add_(1))
    rotating = capture(lambda: [torch.nn.functional.linear(x, w) for w in weights])
    for _ in range(5):  # clocks up
        per_call_flushed(one)
    found = {
        "gpu": torch.cuda.get_device_name(), "l2_mb": l2 / 2**20, "weight_mb": weight_bytes / 2**20,
        "hbm_bound_ms": bound_ms, "weight_copies": copies,
        "per_call_flushed_ms": per_call_flushed(one),
        "empty_graph_per_call_flushed_ms": per_call_flushed(empty),
        "plain_per_call_flushed_ms": per_call_flushed(plain),
        "compiled_plain_per_call_flushed_ms": per_call_flushed(compiled),
        "compiled_graph_per_call_flushed_ms": per_call_flushed(capture(compiled)),
        "rotating_copies_ms": replay_ms(rotating, 50) / copies,
        "one_weight_back_to_back_ms": replay_ms(one, REPLAYS),
        "flush_read_ms": replay_ms(capture(gpu.flush_l2), 20),
    }
    if bound_ms:
        for key in ("per_call_flushed_ms", "plain_per_call_flushed_ms",
                    "compiled_plain_per_call_flushed_ms", "compiled_graph_per_call_flushed_ms",
                    "rotating_copies_ms", "one_weight_back_to_back_ms"):
            found[key.replace("_ms", "_x_bound")] = round(found[key] / bound_ms, 2)
    return found


if __name__ == "__main__":
    sys.exit(main())
