"""Running one cell: check the backend against eager (outputs, and gradients for backward),
then time it, and the eager baseline it is compared with.

A backend that cannot run here is skipped with the reason; an error fails the cell with its
traceback; an accuracy mismatch fails it too, untimed, with "fail_accuracy" and what differs:
the timing of a wrong kernel is not a result. No error escapes: the next cell always runs.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable

import torch
import torch._functorch.config as functorch_config

from runner.contract.status import FAILED, OK, SKIPPED
from runner.engine.timing_data import TimingSettings
from runner.engine.torch_devices import device_problem, release_memory
from runner.engine.torch_timers import measure, measure_pair
from runner.kernels.backends import BACKENDS, Function
from runner.kernels.definitions import BACKWARD, KERNELS, Kernel, bytes_moved
from runner.kernels.results import FAIL_ACCURACY, PASS, KernelResult
from runner.kernels.spec import DEFAULT_RTOL, KernelCell

logger = logging.getLogger(__name__)

SEED = 0


class _Skip(Exception):
    """The cell cannot run here; the message says why."""


class AccuracyMismatch(Exception):
    """The backend's output or gradients differ from eager beyond the tolerance."""


def run_cell(cell: KernelCell, settings: TimingSettings) -> KernelResult:
    result = KernelResult(cell, OK, settings,
                          bytes=bytes_moved(cell.kernel, cell.direction, cell.m, cell.n,
                                            cell.dtype))
    try:
        # Timed backward calls reuse one graph (retain_graph), which compiled graphs that
        # donate their saved buffers refuse; they are compiled (on first call) in here.
        with functorch_config.patch(donated_buffer=False):
            _run(cell, settings, result)
    except _Skip as skip:
        result.status, result.reason = SKIPPED, str(skip)
        result.timing = result.paired = None
    except AccuracyMismatch as mismatch:
        result.status, result.reason, result.accuracy = FAILED, str(mismatch), FAIL_ACCURACY
    except Exception as error:
        logger.info("cell %s failed", cell.key, exc_info=True)  # the traceback is kept
        result.status, result.reason = FAILED, f"{type(error).__name__}: {error}"
        result.traceback = traceback.format_exc()
        result.timing = result.paired = None
    if cell.device == "cuda" or result.status == FAILED:
        release_memory()
    return result


def _run(cell: KernelCell, settings: TimingSettings, result: KernelResult) -> None:
    """Eager alone is timed alone; another backend is timed interleaved with eager, its
    baseline (runner.engine.paired), so its speedup holds on a busy machine."""
    backend = BACKENDS[cell.backend]
    reason = device_problem(cell.device) or backend.unavailable(cell.device)
    if reason:
        raise _Skip(reason)
    kernel = KERNELS[cell.kernel]
    try:
        function = backend.build(cell.kernel, cell.compile_mode)
    except ImportError as error:  # an installed version without this kernel
        raise _Skip(f"{cell.label} has no {cell.kernel} here: {error}") from None
    inputs, grad_out = make_inputs(kernel, cell)
    eager = BACKENDS["eager"].build(cell.kernel, None)

    def calls(fn: Function, what: str) -> Callable[[], object]:
        return _pass(kernel, cell.direction, fn, inputs, grad_out, what)

    if cell.backend == "eager":
        result.timing = measure(calls(function, cell.label), cell.device, settings)
        note = result.timing.instability(cell.label)
        result.measured_s += result.timing.measured_s
    else:
        _check_accuracy(kernel, cell, function, eager, inputs, grad_out)
        result.accuracy = PASS
        result.paired = measure_pair(calls(eager, "eager"), calls(function, cell.label),
                                     cell.device, settings)
        result.timing = result.paired.candidate
        note = result.paired.instability(f"{cell.label} over eager")
        result.measured_s += result.paired.measured_s
    if note:
        result.notes.append(note)


def make_inputs(kernel: Kernel, cell: KernelCell) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The kernel's inputs and a gradient for its output, the same for every backend."""
    generator = torch.Generator(device=cell.device).manual_seed(SEED)
    dtype = getattr(torch, cell.dtype)
    sizes = {"MN": (cell.m, cell.n), "M": (cell.m,), "N": (cell.n,)}

    def tensor(operand) -> torch.Tensor:
        size = sizes[operand.dims]
        if operand.index:  # class indices into the N columns
            return torch.randint(0, cell.n, size, generator=generator, device=cell.device)
        return torch.randn(size, generator=generator, device=cell.device, dtype=dtype)

    return [tensor(operand) for operand in kernel.inputs], tensor(kernel.output)


def _leaves(kernel: Kernel, inputs: list[torch.Tensor], direction: str) -> list[torch.Tensor]:
    """Fresh copies of the inputs; for backward, those with a gradient require it."""
    return [tensor.detach().clone().requires_grad_(direction == BACKWARD
                                                   and operand.name in kernel.grads)
            for operand, tensor in zip(kernel.inputs, inputs, strict=True)]


def _pass(kernel: Kernel, direction: str, function: Function, inputs: list[torch.Tensor],
          grad_out: torch.Tensor, what: str) -> Callable[[], object]:
    """One timed pass. Backward: the forward runs once here, each call is autograd.grad."""
    leaves = _leaves(kernel, inputs, direction)
    if direction != BACKWARD:
        return lambda: function(*leaves)
    output = function(*leaves)
    if not output.requires_grad:
        raise _Skip(f"{what} has no backward for {kernel.name}")
    wanted = [leaf for leaf in leaves if leaf.requires_grad]
    grad = grad_out.to(output.dtype)
    return lambda: torch.autograd.grad(output, wanted, grad, retain_graph=True)


def _evaluate(kernel: Kernel, direction: str, function: Function, inputs: list[torch.Tensor],
              grad_out: torch.Tensor, what: str) -> list[tuple[str, torch.Tensor]]:
    """(name, tensor) of the output and, for backward, the gradient of each input."""
    leaves = _leaves(kernel, inputs, direction)
    output = function(*leaves)
    found = [(kernel.output.name, output)]
    if direction == BACKWARD:
        if not output.requires_grad:
            raise _Skip(f"{what} has no backward for {kernel.name}")
        wanted = [(operand.name, leaf) for operand, leaf in zip(kernel.inputs, leaves,
                                                                 strict=True)
                  if leaf.requires_grad]
        grads = torch.autograd.grad(output, [leaf for _, leaf in wanted],
                                    grad_out.to(output.dtype))
        found += [(f"grad {name}", grad) for (name, _), grad in zip(wanted, grads, strict=True)]
    return found


def _check_accuracy(kernel: Kernel, cell: KernelCell, function: Function, eager: Function,
                    inputs: list[torch.Tensor], grad_out: torch.Tensor) -> None:
    """Compare with eager; a backend's output in another dtype is cast to eager's first."""
    expected = _evaluate(kernel, cell.direction, eager, inputs, grad_out, "eager")
    actual = _evaluate(kernel, cell.direction, function, inputs, grad_out, cell.label)
    problems = []
    for (name, want), (_, got) in zip(expected, actual, strict=True):
        want = want.detach()
        if cell.atol is None:
            rtol = DEFAULT_RTOL[cell.dtype]
            atol = rtol * (want.abs().max().item() if want.numel() else 0.0)
        else:
            atol, rtol = cell.atol, cell.rtol
        try:
            torch.testing.assert_close(got.detach().to(want.dtype), want, atol=atol, rtol=rtol)
        except AssertionError as error:
            details = [line.strip() for line in str(error).splitlines()[1:] if line.strip()]
            problems.append(f"{name}: {'; '.join(details[:3])}")
    if problems:
        allowed = (f"atol={cell.atol:g}, rtol={cell.rtol:g}" if cell.atol is not None
                   else f"the default tolerance for {cell.dtype} (rtol="
                   f"{DEFAULT_RTOL[cell.dtype]:g}, atol=rtol x the tensor's largest magnitude)")
        raise AccuracyMismatch(f"differs from eager beyond {allowed}: " + " | ".join(problems))
