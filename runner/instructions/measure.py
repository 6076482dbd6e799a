"""One benchmark measured in this process (a worker): checked, timed, then counted.

The program is first run once step by step, so that an error is told apart by where it
happens: in the definition's own code (failed), in the conversion to TorchScript (skipped:
that definition cannot be scripted or traced), or a forward+backward whose output does not
require grad (skipped). Only then do the wall-clock timing and the callgrind collection run.
"""

from __future__ import annotations

import shutil
import traceback
from typing import Any

import torch
from torch.utils.benchmark import Timer

from runner.contract.status import FAILED, OK, SKIPPED
from runner.instructions.callgrind import MeasureSettings
from runner.instructions.definitions import Benchmark, Program


def measure(benchmark: Benchmark, settings: MeasureSettings) -> dict[str, Any]:
    """The reply a worker sends: status ok (counts, wall times), skipped (reason) or failed
    (error, and whether trying again may help)."""
    reason = benchmark.cannot_run()
    if reason:
        return {"status": SKIPPED, "reason": reason}
    program = benchmark.program()
    previous = torch.get_num_threads()
    torch.set_num_threads(benchmark.threads)
    try:
        problem = check(benchmark, program)
    finally:
        torch.set_num_threads(previous)
    if problem is not None:
        return problem
    timer = Timer(program.stmt, setup=program.full_setup, num_threads=benchmark.threads,
                  label=benchmark.key)
    wall = timer.blocked_autorange(min_run_time=settings.wall_time_s)
    if shutil.which("valgrind") is None:
        return _failed("valgrind is not installed (e.g. apt-get install valgrind)")
    number = benchmark.definition.number or settings.number
    try:
        stats = timer.collect_callgrind(number=number, repeats=settings.repeats,
                                        collect_baseline=False)
    except Exception:  # the program ran above: this is callgrind's own trouble
        return _failed(f"callgrind: {traceback.format_exc()}", retry=True)
    return {"status": OK, "counts": [s.counts(denoise=True) for s in stats],
            "number": number, "wall_us": [t * 1e6 for t in wall.times]}


def check(benchmark: Benchmark, program: Program) -> dict[str, Any] | None:
    """Run the program once; None when it works, else the reply saying why not."""
    namespace: dict[str, Any] = {"torch": torch}
    steps = [("setup", program.setup), ("torchscript", program.torchscript),
             ("forward", program.forward)]
    for step, code in steps:
        if not code:
            continue
        try:
            exec(compile(code, f"<{benchmark.definition.name} {step}>", "exec"), namespace)
        except Exception as error:
            if step == "torchscript":
                return {"status": SKIPPED, "reason": f"TorchScript: {error}"}
            return _failed(f"{step}: {traceback.format_exc()}")
    if not program.backward:
        return None
    output_name = benchmark.definition.signature.output  # type: ignore[union-attr]
    output = namespace.get(output_name)
    if not isinstance(output, torch.Tensor) or not output.requires_grad:
        what = "is not a tensor" if not isinstance(output, torch.Tensor) else \
            "does not require grad"
        return {"status": SKIPPED, "reason": f"forward+backward: the output {output_name!r} "
                                             f"{what}"}
    try:
        exec(compile(program.backward, f"<{benchmark.definition.name} backward>", "exec"),
             namespace)
    except Exception:
        return _failed(f"backward: {traceback.format_exc()}")
    return None


def _failed(error: str, retry: bool = False) -> dict[str, Any]:
    return {"status": FAILED, "error": error, "retry": retry}
