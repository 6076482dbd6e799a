"""Do the runner's speedups reproduce from process to process on a GPU (issue 29)? One table
and a PASS/FAIL line per target.

    .venv/bin/python perf/gpu_check.py --device cpu [--compile] [--out DIR]
    python3 perf/gpu_check.py --device cuda --out DIR      # one H100: perf/gpu_check_device.sh

Each `python -m runner run SPEC` runs in a process of its own (one process is one "run"),
with fresh inductor and Triton caches, so that every run compiles as on a fresh machine:
- (a) A/A: the baseline recipe (bf16 against its own copy) at three shapes, decode-like, mid
  and compute-bound, in two processes;
- (b) a 9-cell spec, three recipes at those shapes, in two processes;
- (c) torchao's runner (`python -m benchmarks.microbenchmarks.benchmark_runner --config`) on
  (b)'s spec, in a process with fresh caches too, when `benchmarks.microbenchmarks` is
  importable (a torchao checkout on PYTHONPATH, or --torchao-src); else it says so.
CUDA: shapes 32x4096x4096, 1024x4096x4096, 8192x8192x8192; recipes baseline, int8dq,
float8dq-row; compile mode default. CPU: shapes 16x256x256, 64x512x512, 256x1024x1024;
recipes baseline, int8wo, int8dq (float8dq needs CUDA); eager unless --compile.

The table has a row per cell: both runs' speedups with their 95% intervals, how far apart
they are and whether they agree (each inside the other's interval, or within 2%), for the
baseline cells the A/A error |1 - speedup| and whether each interval holds 1.00, the bf16
time, torchao's speedup beside ours, and the records' `timing_method` / `l2` where they
carry them. Then the targets (issue 29):
- A/A error <= 1% in every A/A cell ((a)'s and (b)'s baseline cells, both runs);
- A/A coverage: intervals holding 1.00 in >= 95% of them (CPU: >= 90%);
- agreement of the two runs in >= 90% of (b)'s cells;
- the decode shape's bf16 time (its baseline time metric, compiled where the spec compiles)
  <= 2x the HBM bound, its weight's bytes over the memory bandwidth (a table by GPU name;
  --bandwidth GB/s for another), in every (b) cell of that shape;
- that time within 5% across the cells of a run (max / min - 1);
- each spec run's wall time <= torchao's runner's on the same spec;
- the whole check within 8 minutes.
On CPU only the coverage and the agreement are judged (the others print as INFO). A target
without data fails (a run that measured nothing never passes); one that cannot be measured
on this machine (no torchao runner, a GPU of unknown bandwidth) is SKIP and says why.
Exit status: 0 when every judged target passes, 1 otherwise, 2 on a usage error.

--out DIR writes gpu_check.txt (what was printed), gpu_check.json (the summary: targets,
cells, wall times), records.json (every run's records) and torchao.csv (its runner's CSV).
Budget: on one H200, 506 s with torchao's runner (79 s of it): A/A runs 23 s and 27 s, spec
runs 224 s and 153 s, nearly all of it compiling (ARCHITECTURE.md, "GPU timing on an H100 and
an H200"); on 2026-11-29 515 s: spec runs 242 s (cut by --deadline after 7 of 9 cells) and
147 s, compiling 186 s and 113 s of them, and each later build now gets a cell budget of its
own, so a first process's slow compiles cost more; --budget lowers the seconds per speedup,
--deadline stops in time to print the table. About 40 s on a quiet 2-CPU machine (eager
cells in two builds), a minute with torchao's runner.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dashboards.peaks import peak_bandwidth  # noqa: E402  (plain Python: no Django)

SHAPES = {
    "cuda": ((32, 4096, 4096), (1024, 4096, 4096), (8192, 8192, 8192)),
    "cpu": ((16, 256, 256), (64, 512, 512), (256, 1024, 1024)),
}  # decode-like (memory bound), mid, compute bound: the first is the decode shape
RECIPES = {"cuda": ("baseline", "int8dq", "float8dq-row"), "cpu": ("baseline", "int8wo", "int8dq")}
BASELINE = "baseline"
# Peak memory bandwidth in GB/s by a part of the GPU's name; the first that matches counts.
BF16_BYTES = 2

AA_MAX_ERROR = 0.01
AA_COVERAGE = {"cuda": 0.95, "cpu": 0.90}
AGREEMENT = 0.90
AGREE_WITHIN = 0.02  # two speedups agree when each is in the other's interval, or this close
HBM_FACTOR = 2.0
DECODE_SPREAD = 0.05
CHECK_SECONDS = 480  # the whole check on one H100
# With --deadline: seconds kept for the table and the files after the last process, and the
# fewest a process is started with.
DEADLINE_RESERVE_S = 15.0
LEAST_PROCESS_S = 30.0
JUDGED_ON_CPU = {"A/A coverage", "agreement"}

PASS, FAIL, SKIP, INFO = "PASS", "FAIL", "SKIP", "INFO"
SPEEDUP_METRIC = "Fwd Speedup (x)"
BF16_TIME_METRIC = "Bfloat16 Fwd Time (ms)"
STATUS_METRIC = "status"
NOTE_KEYS = ("timing_method", "l2", "builds", "suspect")  # other agents' keys, when present

Shape = tuple[int, int, int]
Key = tuple[str, Shape]  # (recipe label, shape)


# --- reading records ---------------------------------------------------------------------

@dataclass(frozen=True)
class Measured:
    """One cell of one run, as its records say."""

    status: str = "ok"  # ok, skipped, failed
    speedup: float | None = None
    low: float | None = None
    high: float | None = None
    unstable: bool = False
    bf16_ms: float | None = None
    reason: str = ""
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.speedup is not None

    def holds(self, value: float) -> bool:
        """Whether the 95% interval holds `value`; False without an interval."""
        return self.low is not None and self.high is not None and self.low <= value <= self.high

    def text(self) -> str:
        if not self.ok:
            return self.status
        interval = f" [{self.low:.3f}, {self.high:.3f}]" if self.low is not None else ""
        return f"{self.speedup:.3f}{interval}{' unstable' if self.unstable else ''}"


def shape_text(shape: Shape) -> str:
    return "x".join(map(str, shape))


def read_run(records: list[dict[str, Any]]) -> dict[Key, Measured]:
    """The cells of one run's v3 records, by recipe and shape."""
    parts: dict[Key, dict[str, Any]] = {}
    for record in records:
        info = record["benchmark"]["extra_info"]
        key = (record["benchmark"]["dtype"], tuple(info["shape"]))
        cell = parts.setdefault(key, {})
        metric = record["metric"]
        extra = metric.get("extra_info", {})
        if metric["name"] == STATUS_METRIC:
            cell["status"] = extra["benchmark_values"][0]
            cell["reason"] = extra.get("reason") or extra.get("error") or ""
        elif metric["name"] == SPEEDUP_METRIC:
            cell.update(speedup=extra["speedup"], low=extra.get("ci_low"),
                        high=extra.get("ci_high"), unstable=bool(extra.get("unstable")))
            notes = {name: extra[name] for name in NOTE_KEYS if name in extra}
            if "l2" not in notes and "l2_flush" in info:
                notes["l2"] = "flushed" if info["l2_flush"] else "warm"
            if "builds" in notes:  # each build's speedup, not its whole summary
                notes["builds"] = "/".join(f"{build['speedup']:.3f}" for build in notes["builds"])
            cell["notes"] = notes
        elif metric["name"] == BF16_TIME_METRIC:
            cell["bf16_ms"] = extra["median"]
    return {key: Measured(**cell) for key, cell in parts.items()}


def time_split(records: list[dict[str, Any]]) -> str:
    """Where a run's time went: its cells' wall time, compiling (and of it, Triton's
    autotuning) and timed calls (the rest of a cell is eager runs, warm-up, graph capture and
    checks; outside the cells, start-up)."""
    totals = {"cells": 0.0, "compiling": 0.0, "autotuning": 0.0, "timed": 0.0}
    for record in records:
        extra = record["metric"].get("extra_info", {})
        if record["metric"]["name"] == SPEEDUP_METRIC and "cell_wall_s" in extra:
            totals["cells"] += extra["cell_wall_s"]
            totals["compiling"] += extra["compile_s"]
            totals["autotuning"] += extra.get("autotune_s", 0.0)  # records of older runs lack it
            totals["timed"] += extra["measured_s"]
    return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in totals.items())


def gpu_name(records: list[dict[str, Any]]) -> str:
    for record in records:
        for runner in record.get("runners", []):
            if runner.get("gpu_info"):
                return runner["gpu_info"]
    return ""


def bandwidth_for(gpu: str) -> float | None:
    """GB/s of a GPU's memory by its name (the kernels page's table, dashboards.peaks); None
    for a GPU not listed."""
    peak = peak_bandwidth(gpu)
    return peak.gbs if peak else None


def torchao_speedups(rows: list[dict[str, str]]) -> dict[Key, float]:
    """Speedups from torchao's runner's CSV: its compiled speedup on the baseline where the
    cell compiled, else the eager one; an older CSV with one time per model gives the baseline
    recipe's time over the recipe's."""
    found: dict[Key, float] = {}
    times: dict[Key, float] = {}
    for row in rows:
        recipe = row.get("quantization") or BASELINE
        if recipe in ("None", ""):
            recipe = BASELINE
        key = (recipe, (int(row["m"]), int(row["k"]), int(row["n"])))
        compiled = _number(row.get("compile speedup on baseline"))
        eager = _number(row.get("eager speedup on baseline"))
        mode = (row.get("torch_compile_mode") or "").lower()
        if compiled and mode not in ("", "none", "false"):
            found[key] = compiled
        elif eager:
            found[key] = eager
        elif _number(row.get("model_inference_time_in_ms")):
            times[key] = float(row["model_inference_time_in_ms"])
    for (recipe, shape), ms in times.items():
        base = times.get((BASELINE, shape))
        if base:
            found.setdefault((recipe, shape), base / ms)
    return found


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value else None


# --- judging -----------------------------------------------------------------------------

@dataclass
class Check:
    """Everything measured: the inputs of the table and of the targets."""

    device: str
    shapes: tuple[Shape, ...]
    recipes: tuple[str, ...]
    aa_runs: list[dict[Key, Measured]]
    spec_runs: list[dict[Key, Measured]]
    spec_walls: list[float]
    torchao: dict[Key, float] | None = None  # None: its runner did not run
    torchao_wall: float | None = None
    torchao_note: str = ""  # why it did not run, or how it ended
    gpu: str = ""
    bandwidth_gbps: float | None = None
    total_s: float | None = None  # the whole check, every process

    def aa_keys(self) -> list[Key]:
        return [(BASELINE, shape) for shape in self.shapes]

    def spec_keys(self) -> list[Key]:
        return [(recipe, shape) for shape in self.shapes for recipe in self.recipes]


@dataclass(frozen=True)
class Target:
    name: str
    figure: str  # what was measured, in words
    status: str  # PASS, FAIL, SKIP, INFO
    why: str = ""


def agree(a: Measured, b: Measured) -> bool:
    """Two runs' speedups agree: each inside the other's interval, or within 2%."""
    if not (a.ok and b.ok):
        return False
    if a.holds(b.speedup) and b.holds(a.speedup):
        return True
    return abs(a.speedup / b.speedup - 1) <= AGREE_WITHIN


def aa_cells(check: Check) -> list[Measured]:
    """Every A/A measurement: (a)'s cells and (b)'s baseline cells, in every run."""
    found = []
    for runs in (check.aa_runs, check.spec_runs):
        for run in runs:
            found += [run.get(key, Measured("missing")) for key in check.aa_keys()]
    return found


def decode_times(check: Check) -> list[list[float]]:
    """Per (b) run, the bf16 times of the decode shape's cells."""
    decode = check.shapes[0]
    return [[cell.bf16_ms for (_, shape), cell in run.items()
             if shape == decode and cell.ok and cell.bf16_ms is not None]
            for run in check.spec_runs]


def hbm_bound_ms(shape: Shape, gbps: float) -> float:
    """Reading the bf16 weight once at `gbps`: the least time a memory-bound call takes."""
    _, k, n = shape
    return k * n * BF16_BYTES / (gbps * 1e9) * 1e3


def judge(check: Check) -> list[Target]:
    targets = [
        _aa_error(check), _aa_coverage(check), _agreement(check), _hbm(check), _spread(check),
        _wall(check), _total(check),
    ]
    if check.device == "cuda":
        return targets
    return [t if t.name in JUDGED_ON_CPU or t.status == SKIP
            else replace(t, status=INFO, why=f"not judged on CPU; {t.why}") for t in targets]


def _aa_error(check: Check) -> Target:
    name = "A/A error"
    cells = aa_cells(check)
    measured = [cell for cell in cells if cell.ok]
    if not measured:
        return Target(name, "no A/A cell measured", FAIL, "no data")
    worst = max(abs(1 - cell.speedup) for cell in measured)
    missing = len(cells) - len(measured)
    figure = f"max |1 - speedup| {worst:.2%} over {len(measured)} of {len(cells)} A/A cells"
    passed = worst <= AA_MAX_ERROR and not missing
    why = f"{missing} A/A cells without a speedup" if missing else f"<= {AA_MAX_ERROR:.0%}"
    return Target(name, figure, PASS if passed else FAIL, why)


def _aa_coverage(check: Check) -> Target:
    name = "A/A coverage"
    cells = aa_cells(check)
    if not any(cell.ok for cell in cells):
        return Target(name, "no A/A cell measured", FAIL, "no data")
    held = sum(cell.holds(1.0) for cell in cells)  # a missing cell counts as a miss
    need = AA_COVERAGE[check.device]
    share = held / len(cells)
    return Target(name, f"{held}/{len(cells)} intervals hold 1.00 ({share:.0%})",
                  PASS if share >= need else FAIL, f">= {need:.0%}")


def _agreement(check: Check) -> Target:
    name = "agreement"
    if len(check.spec_runs) < 2 or not any(cell.ok for run in check.spec_runs
                                           for cell in run.values()):
        return Target(name, "fewer than two runs measured", FAIL, "no data")
    keys = check.spec_keys()
    first, second = check.spec_runs[:2]
    agreeing = sum(agree(first.get(key, Measured("missing")), second.get(key, Measured("missing")))
                   for key in keys)
    share = agreeing / len(keys)
    return Target(name, f"{agreeing}/{len(keys)} cells agree across processes ({share:.0%})",
                  PASS if share >= AGREEMENT else FAIL,
                  f">= {AGREEMENT:.0%}; each in the other's interval or within "
                  f"{AGREE_WITHIN:.0%}")


def _hbm(check: Check) -> Target:
    decode = check.shapes[0]
    name = f"bf16 {shape_text(decode)} vs HBM bound"
    times = [ms for run in decode_times(check) for ms in run]
    if not times:
        return Target(name, "no bf16 time of the decode shape", FAIL, "no data")
    if check.bandwidth_gbps is None:
        unknown = (f"no bandwidth known for {check.gpu!r}" if check.device == "cuda"
                   else "n/a on CPU")
        return Target(name, f"bf16 {statistics.median(times):.4f} ms (median)", SKIP,
                      f"{unknown}; --bandwidth GB/s gives one")
    bound = hbm_bound_ms(decode, check.bandwidth_gbps)
    worst = max(times)
    figure = (f"bf16 {min(times):.4f}-{worst:.4f} ms, bound {bound:.4f} ms "
              f"({check.bandwidth_gbps:.0f} GB/s): worst {worst / bound:.2f}x")
    return Target(name, figure, PASS if worst <= HBM_FACTOR * bound else FAIL,
                  f"<= {HBM_FACTOR:.0f}x in every cell")


def _spread(check: Check) -> Target:
    name = "bf16 decode spread in a run"
    runs = [run for run in decode_times(check) if len(run) >= 2]
    if not runs:
        return Target(name, "fewer than two decode cells in a run", FAIL, "no data")
    spreads = [max(run) / min(run) - 1 for run in runs]
    figure = "max/min - 1 per run: " + ", ".join(f"{s:.1%}" for s in spreads)
    return Target(name, figure, PASS if max(spreads) <= DECODE_SPREAD else FAIL,
                  f"<= {DECODE_SPREAD:.0%}")


def _wall(check: Check) -> Target:
    name = "wall time vs torchao"
    ours = ", ".join(f"{wall:.0f} s" for wall in check.spec_walls)
    if len(check.spec_walls) < 2:
        return Target(name, f"{len(check.spec_walls)} of 2 spec runs ran", FAIL, "no data")
    if check.torchao_wall is None or check.torchao is None:
        return Target(name, f"ours {ours}", SKIP,
                      check.torchao_note or "torchao's runner did not run")
    worst = max(check.spec_walls)
    return Target(name, f"ours {ours}, torchao {check.torchao_wall:.0f} s",
                  PASS if worst <= check.torchao_wall else FAIL, "each of our runs <= torchao's")


def _total(check: Check) -> Target:
    name = "whole check"
    if check.total_s is None:
        return Target(name, "not timed", SKIP)
    return Target(name, f"{check.total_s:.0f} s", PASS if check.total_s <= CHECK_SECONDS else FAIL,
                  f"<= {CHECK_SECONDS // 60} minutes; --budget S lowers the seconds per speedup")


def exit_status(targets: list[Target]) -> int:
    return 1 if any(target.status == FAIL for target in targets) else 0


# --- the table ---------------------------------------------------------------------------

def rows(check: Check) -> list[list[str]]:
    """One row per cell: (a)'s A/A cells, then (b)'s cells."""
    table = []
    for part, keys, runs in (("A/A", check.aa_keys(), check.aa_runs),
                             ("spec", check.spec_keys(), check.spec_runs)):
        for key in keys:
            cells = [run.get(key, Measured("missing")) for run in runs]
            table.append([part, key[0], shape_text(key[1]), *_row(key, cells, part, check)])
    return table


HEADERS = ["part", "recipe", "shape", "run 1 [95% CI]", "run 2 [95% CI]", "diff", "agree",
           "A/A |1-s|", "holds 1.00", "bf16 ms", "torchao", "timing"]


def _row(key: Key, cells: list[Measured], part: str, check: Check) -> list[str]:
    cells = (cells + [Measured("missing")] * 2)[:2]
    first, second = cells
    both = first.ok and second.ok
    diff = f"{abs(first.speedup / second.speedup - 1):.1%}" if both else "-"
    baseline = key[0] == BASELINE
    error = "/".join(f"{abs(1 - c.speedup):.1%}" if c.ok else "-" for c in cells)
    holds = "/".join(("yes" if c.holds(1.0) else "no") if c.ok else "-" for c in cells)
    bf16 = "/".join(f"{c.bf16_ms:.4f}" if c.bf16_ms is not None else "-" for c in cells)
    theirs = "-"
    if part == "spec" and check.torchao is not None:
        value = check.torchao.get(key)
        theirs = f"{value:.3f}" if value is not None else "missing"
    notes = [", ".join(f"{k}={v}" for k, v in c.notes.items()) for c in cells]
    timing = notes[0] if notes[0] == notes[1] else " | ".join(notes)
    reasons = "; ".join(dict.fromkeys(c.reason for c in cells if c.reason))
    return [first.text(), second.text(), diff, ("yes" if agree(first, second) else "no"),
            error if baseline else "", holds if baseline else "", bf16, theirs,
            (timing + (f" {reasons}" if reasons else "")).strip() or "-"]


def render(check: Check, targets: list[Target]) -> str:
    table = [HEADERS, *rows(check)]
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADERS))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
             for row in table]
    lines.insert(1, "  ".join("-" * width for width in widths))
    lines.append("")
    lines.append(f"targets (issue 29, {check.device}):")
    name_width = max(len(target.name) for target in targets)
    for target in targets:
        lines.append(f"  {target.status:4s}  {target.name:{name_width}s}  {target.figure}"
                     + (f"  ({target.why})" if target.why else ""))
    return "\n".join(lines)


# --- running -----------------------------------------------------------------------------

def spec_yaml(name: str, recipes: tuple[str, ...], shapes: tuple[Shape, ...], device: str,
              compile_mode: str | None) -> str:
    """A torchao microbenchmark config that both runners read (torchao's runner compiles only
    with `use_torch_compile: true` in its recent versions, with the mode alone in older ones)."""
    shape_list = ", ".join(f"[{m}, {k}, {n}]" for m, k, n in shapes)
    mode = f'"{compile_mode}"' if compile_mode else "false"
    return "\n".join([
        'benchmark_mode: "inference"',
        "quantization_config_recipe_names: [" + ", ".join(f'"{r}"' for r in recipes) + "]",
        f'output_dir: "results/{name}"',
        "model_params:",
        f'  - name: "{name}"',
        "    matrix_shapes:",
        f'      - name: "custom"\n        shapes: [{shape_list}]',
        '    high_precision_dtype: "torch.bfloat16"',
        f"    use_torch_compile: {'true' if compile_mode else 'false'}",  # torchao's switch
        f"    torch_compile_mode: {mode}",
        f'    device: "{device}"',
        '    model_type: "linear"',
        "",
    ])


@dataclass
class Process:
    name: str
    rc: int | None  # None: killed at its time limit
    wall_s: float
    tail: str  # the last lines of its output
    last: str  # the last line it printed to stdout (the runner's: its cells by status)


def run_process(name: str, argv: list[str], folder: Path, pythonpath: list[str],
                timeout: float) -> Process:
    """A command in `folder` with caches of its own, timed from start to exit. At `timeout` it
    gets SIGTERM, on which the runner writes the records of the cells it finished."""
    env = _environment(pythonpath)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(folder / "inductor-cache")
    env["TRITON_CACHE_DIR"] = str(folder / "triton-cache")
    started = time.perf_counter()
    with subprocess.Popen(argv, cwd=folder, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as child:
        try:
            stdout, stderr = child.communicate(timeout=timeout)
            rc = child.returncode
        except subprocess.TimeoutExpired:
            child.terminate()
            try:
                stdout, stderr = child.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                stdout, stderr = child.communicate()
            rc = None
    wall = time.perf_counter() - started
    last = (stdout.strip().splitlines() or [""])[-1]
    return Process(name, rc, wall, "\n".join((stdout + stderr).strip().splitlines()[-8:]), last)


def _environment(pythonpath: list[str]) -> dict[str, str]:
    """This process's environment with `pythonpath` first on PYTHONPATH."""
    paths = [*pythonpath, os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path for path in paths if path)}


def run_ours(name: str, spec: Path, work: Path, args: argparse.Namespace, timeout: float
             ) -> tuple[list[dict[str, Any]], Process]:
    folder = work / name
    folder.mkdir()
    output = folder / "records.json"
    argv = [sys.executable, "-m", "runner", "run", str(spec), "-o", str(output)]
    if args.budget is not None:
        argv += ["--budget", str(args.budget)]
    if args.rotate_weights:
        argv.append("--rotate-weights")
    process = run_process(name, argv, folder, [str(ROOT)], timeout)
    records = json.loads(output.read_text()) if output.exists() else []
    return records, process


def torchao_importable(pythonpath: list[str]) -> bool:
    probe = ("import importlib.util, sys; "
             "sys.exit(importlib.util.find_spec('benchmarks.microbenchmarks') is None)")
    try:
        return subprocess.run([sys.executable, "-c", probe], env=_environment(pythonpath),
                              cwd=tempfile.gettempdir(),
                              capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def run_torchao(spec: Path, work: Path, args: argparse.Namespace, timeout: float
                ) -> tuple[list[dict[str, str]], Process]:
    folder = work / "torchao"
    folder.mkdir()
    argv = [sys.executable, "-m", "benchmarks.microbenchmarks.benchmark_runner",
            "--config", str(spec)]
    pythonpath = [str(Path(args.torchao_src).resolve())] if args.torchao_src else []
    process = run_process("torchao", argv, folder, pythonpath, timeout)
    found = sorted(folder.glob("**/results*.csv"), key=lambda path: path.stat().st_mtime)
    if not found:
        return [], process
    with found[-1].open(newline="") as handle:
        return list(csv.DictReader(handle)), process


class Report:
    """Prints as it goes and keeps what it printed for --out."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                        help="compile mode default (default: on for cuda, off for cpu)")
    parser.add_argument("--budget", type=float, default=None,
                        help="the runner's seconds per speedup (default: the runner's)")
    parser.add_argument("--rotate-weights", action="store_true",
                        help="CUDA: our runs time calls cold over rotated copies of each "
                             "model instead of evicting L2 before each call")
    parser.add_argument("--bandwidth", type=float, default=None, metavar="GB/S",
                        help="memory bandwidth for the HBM bound (default: by GPU name)")
    parser.add_argument("--torchao-src", metavar="DIR",
                        help="a torchao checkout whose benchmarks/ package is torchao's runner")
    parser.add_argument("--skip-torchao", action="store_true", help="leave (c) out")
    parser.add_argument("--process-timeout", type=float, default=240.0, metavar="S",
                        help="seconds one process may run before it is stopped")
    parser.add_argument("--deadline", type=float, default=None, metavar="S",
                        help="seconds the whole check may take: each process is stopped in "
                             "time to print the table, and torchao's runner is left out when "
                             "less than its last run's time is left (default: no limit)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="write gpu_check.txt, gpu_check.json, records.json, torchao.csv")
    args = parser.parse_args()
    if args.budget is not None and args.budget < 0 or args.bandwidth is not None and \
            args.bandwidth <= 0 or args.deadline is not None and args.deadline <= 0:
        parser.error("--budget must be >= 0, --bandwidth and --deadline > 0")
    if args.torchao_src and not Path(args.torchao_src).is_dir():
        parser.error(f"--torchao-src {args.torchao_src}: no such folder")
    compiled = args.compile if args.compile is not None else args.device == "cuda"
    report = Report()
    with tempfile.TemporaryDirectory(prefix="gpu_check-") as temp:
        check, extra = measure(args, "default" if compiled else None, Path(temp), report)
    targets = judge(check)
    report()
    report(render(check, targets))
    extra["load_avg_end"] = list(os.getloadavg())
    report(f"\nwall: ours {', '.join(f'{w:.1f} s' for w in check.spec_walls)} per spec run; "
           f"torchao {'-' if check.torchao_wall is None else f'{check.torchao_wall:.1f} s'}; "
           f"whole check {extra['total_s']:.0f} s; load average "
           f"{' '.join(f'{v:.2f}' for v in extra['load_avg_start'])} at start, "
           f"{' '.join(f'{v:.2f}' for v in extra['load_avg_end'])} at end")
    status = exit_status(targets)
    report(f"result: {'PASS' if status == 0 else 'FAIL'}")
    if args.out:
        write_out(args.out, report, check, targets, extra)
    return status


def measure(args: argparse.Namespace, compile_mode: str | None, work: Path,
            report: Report) -> tuple[Check, dict[str, Any]]:
    started = time.perf_counter()
    shapes, recipes = SHAPES[args.device], RECIPES[args.device]
    load_start = list(os.getloadavg())
    report(f"gpu_check on {args.device}: shapes {', '.join(map(shape_text, shapes))}; "
           f"recipes {', '.join(recipes)}; compile {compile_mode or 'off'}; "
           f"{os.cpu_count()} CPUs, load average {' '.join(f'{v:.2f}' for v in load_start)}")
    aa_spec, spec = work / "aa.yml", work / "spec.yml"
    aa_spec.write_text(spec_yaml("gpu_check_aa", (BASELINE,), shapes, args.device, compile_mode))
    spec.write_text(spec_yaml("gpu_check", recipes, shapes, args.device, compile_mode))
    records: dict[str, list[dict[str, Any]]] = {}
    walls: dict[str, float] = {}
    ends = None if args.deadline is None else started + args.deadline - DEADLINE_RESERVE_S

    def time_left() -> float:
        """Seconds a process may run: --process-timeout, less when the deadline is near."""
        if ends is None:
            return args.process_timeout
        return min(args.process_timeout, ends - time.perf_counter())

    for run in (1, 2):  # A/A and spec alternate, so a drift hits both runs of each alike
        for kind, path in (("aa", aa_spec), ("spec", spec)):
            name = f"{kind}-{run}"
            if time_left() < LEAST_PROCESS_S:
                records[name] = []
                report(f"  {name:7s} not run: {max(time_left(), 0):.0f} s left of --deadline")
                continue
            records[name], process = run_ours(name, path, work, args, time_left())
            walls[name] = process.wall_s
            report(f"  {name:7s} {process.wall_s:6.1f} s  exit {process.rc}  "
                   f"{len(records[name])} records  {process.last}")
            report(f"          {time_split(records[name])}")
            if process.rc != 0:
                report("    " + process.tail.replace("\n", "\n    "))
            if args.out:  # kept as it grows: a check stopped at its time limit still has it
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / "records.json").write_text(json.dumps(records))
    torchao, torchao_wall, note, torchao_rows = None, None, "", []
    pythonpath = [str(Path(args.torchao_src).resolve())] if args.torchao_src else []
    if args.skip_torchao:
        note = "--skip-torchao"
    elif not torchao_importable(pythonpath):
        note = "benchmarks.microbenchmarks is not importable (a torchao checkout: --torchao-src)"
    elif time_left() < LEAST_PROCESS_S:
        note = f"{max(time_left(), 0):.0f} s left of --deadline"
    else:
        torchao_rows, process = run_torchao(spec, work, args, time_left())
        report(f"  torchao {process.wall_s:6.1f} s  exit {process.rc}  {len(torchao_rows)} rows")
        if process.rc == 0 and torchao_rows:
            torchao, torchao_wall = torchao_speedups(torchao_rows), process.wall_s
        else:
            stopped = " (stopped at its time limit)" if process.rc is None else ""
            note = (f"torchao's runner exited {process.rc}{stopped} after {process.wall_s:.0f} s "
                    f"with {len(torchao_rows)} CSV rows")
            report("    " + process.tail.replace("\n", "\n    "))
    if note:
        report(f"  torchao's runner: not run: {note}")
    every = [record for run in records.values() for record in run]
    gpu = gpu_name(every)
    bandwidth = args.bandwidth if args.bandwidth is not None else bandwidth_for(gpu)
    check = Check(
        device=args.device, shapes=shapes, recipes=recipes,
        aa_runs=[read_run(records["aa-1"]), read_run(records["aa-2"])],
        spec_runs=[read_run(records["spec-1"]), read_run(records["spec-2"])],
        spec_walls=[walls[name] for name in ("spec-1", "spec-2") if name in walls],
        torchao=torchao, torchao_wall=torchao_wall, torchao_note=note, gpu=gpu,
        bandwidth_gbps=bandwidth, total_s=time.perf_counter() - started,
    )
    if gpu:
        report(f"  GPU {gpu}, bandwidth {bandwidth or 'unknown'} GB/s")
    extra = {"records": records, "walls": walls, "torchao_rows": torchao_rows,
             "load_avg_start": load_start, "total_s": check.total_s}
    return check, extra


def summary(check: Check, targets: list[Target], extra: dict[str, Any]) -> dict[str, Any]:
    def cells(runs: list[dict[Key, Measured]]) -> list[dict[str, Any]]:
        return [{"run": number, "recipe": recipe, "shape": list(shape), **asdict(cell)}
                for number, run in enumerate(runs, 1) for (recipe, shape), cell in run.items()]

    return {
        "device": check.device, "gpu": check.gpu, "bandwidth_gbps": check.bandwidth_gbps,
        "shapes": [list(shape) for shape in check.shapes], "recipes": list(check.recipes),
        "passed": exit_status(targets) == 0,
        "targets": [asdict(target) for target in targets],
        "aa_cells": cells(check.aa_runs), "spec_cells": cells(check.spec_runs),
        "torchao": None if check.torchao is None else [
            {"recipe": recipe, "shape": list(shape), "speedup": value}
            for (recipe, shape), value in check.torchao.items()],
        "torchao_note": check.torchao_note,
        "wall_s": {**extra["walls"], "torchao": check.torchao_wall, "total": extra["total_s"]},
        "load_avg": {"start": extra["load_avg_start"], "end": extra.get("load_avg_end")},
    }


def write_out(folder: Path, report: Report, check: Check, targets: list[Target],
              extra: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gpu_check.txt").write_text("\n".join(report.lines) + "\n")
    (folder / "gpu_check.json").write_text(json.dumps(summary(check, targets, extra), indent=1))
    (folder / "records.json").write_text(json.dumps(extra["records"]))
    if extra["torchao_rows"]:
        with (folder / "torchao.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(extra["torchao_rows"][0]))
            writer.writeheader()
            writer.writerows(extra["torchao_rows"])
    print(f"written to {folder}: {', '.join(sorted(p.name for p in folder.iterdir()))}")


if __name__ == "__main__":
    sys.exit(main())
