"""Who implements the kernels: PyTorch eager, torch.compile, and Liger or Quack when installed.

A backend turns a kernel name into a function of the kernel's inputs (definitions.KERNELS
order) returning its output; backward goes through autograd, so a backend whose output
does not require grad has no backward. torch and the packages are imported only when a
function is built, so listing backends and validating specs need neither.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from typing import Any

from runner.kernels.definitions import EPS

Function = Callable[..., Any]


@dataclass(frozen=True)
class Backend:
    name: str
    build: Callable[[str, str | None], Function]  # (kernel, compile mode) -> function
    package: str | None = None  # module that must be importable
    distribution: str | None = None  # what `pip install` calls it
    needs_cuda: bool = False
    min_capability: tuple[int, int] | None = None
    compiles: bool = False  # runs once per compile mode

    def installed(self) -> bool:
        return self.package is None or importlib.util.find_spec(self.package) is not None

    def version(self) -> str | None:
        if self.distribution is None or not self.installed():
            return None
        try:
            return metadata.version(self.distribution)
        except metadata.PackageNotFoundError:
            return None

    def unavailable(self, device: str) -> str | None:
        """Why this backend cannot run on `device` here (every reason); None when it can."""
        reasons = []
        if not self.installed():
            reasons.append(f"{self.package} is not installed (pip install {self.distribution})")
        if self.needs_cuda and device != "cuda":
            reasons.append(f"{self.name} needs CUDA; the device is {device}")
        elif self.min_capability and device == "cuda":
            import torch  # torch: --list and specs need none

            if torch.cuda.is_available():
                found = torch.cuda.get_device_capability()
                if found < self.min_capability:
                    need = ".".join(map(str, self.min_capability))
                    reasons.append(f"{self.name} needs compute capability {need} or newer; "
                                   f"this GPU has {found[0]}.{found[1]}")
        return "; ".join(reasons) or None


def _eager(kernel: str, mode: str | None = None) -> Function:
    import torch.nn.functional as F  # torch: only when a cell runs

    functions = {
        "cross_entropy": lambda x, target: F.cross_entropy(x, target, reduction="none"),
        "softmax": lambda x: F.softmax(x, dim=-1),
        "rms_norm": lambda x, weight: F.rms_norm(x, weight.shape, weight, EPS),
        "layer_norm": lambda x, weight: F.layer_norm(x, weight.shape, weight, None, EPS),
    }
    return functions[kernel]


def _compiled(kernel: str, mode: str | None) -> Function:
    """The eager function under torch.compile, for static shapes (each cell compiles anew)."""
    import torch  # torch: only when a cell runs

    # A fresh recompile budget: every cell compiles the same functions for another shape,
    # and past the limit dynamo would silently run them eagerly.
    torch._dynamo.reset()
    return torch.compile(_eager(kernel), mode=mode, fullgraph=True, dynamic=False)


def _liger(kernel: str, mode: str | None = None) -> Function:
    def cross_entropy() -> Function:
        from liger_kernel.transformers.functional import liger_cross_entropy  # optional package

        return lambda x, target: liger_cross_entropy(x, target, reduction="none")

    def softmax() -> Function:
        from liger_kernel.transformers.softmax import LigerSoftmax  # optional package

        return LigerSoftmax()

    def rms_norm() -> Function:
        from liger_kernel.transformers.functional import liger_rms_norm  # optional package

        # offset 0, Llama casting, and not in place: an in-place backward would overwrite
        # the output gradient that every timed backward call reuses.
        return lambda x, weight: liger_rms_norm(x, weight, EPS, 0.0, "llama", False)

    def layer_norm() -> Function:
        from liger_kernel.transformers.functional import liger_layer_norm  # optional package

        zeros = _zeros_like_cached()
        return lambda x, weight: liger_layer_norm(x, weight, zeros(weight), EPS)

    builders = {"cross_entropy": cross_entropy, "softmax": softmax, "rms_norm": rms_norm,
                "layer_norm": layer_norm}
    return builders[kernel]()


def _quack(kernel: str, mode: str | None = None) -> Function:
    def cross_entropy() -> Function:
        from quack.cross_entropy import cross_entropy  # optional package

        return cross_entropy  # a float32 loss per row

    def softmax() -> Function:
        from quack.softmax import softmax  # optional package

        return softmax

    # Quack's norms take float32 weights; the cast moves N values, nothing against M x N.
    def rms_norm() -> Function:
        from quack.rmsnorm import rmsnorm  # optional package

        return lambda x, weight: rmsnorm(x, weight.float(), eps=EPS)

    def layer_norm() -> Function:
        from quack.layernorm import layernorm  # optional package

        return lambda x, weight: layernorm(x, weight.float(), eps=EPS)

    builders = {"cross_entropy": cross_entropy, "softmax": softmax, "rms_norm": rms_norm,
                "layer_norm": layer_norm}
    return builders[kernel]()


def _zeros_like_cached() -> Callable[[Any], Any]:
    """Liger's LayerNorm takes a bias; ours has none, so it gets zeros made once per weight."""
    made: dict[tuple, Any] = {}

    def zeros(weight: Any) -> Any:
        key = (tuple(weight.shape), weight.dtype, weight.device)
        if key not in made:
            made[key] = weight.new_zeros(weight.shape)
        return made[key]

    return zeros


BACKENDS = {
    backend.name: backend
    for backend in (
        Backend("eager", _eager),
        Backend("compiled", _compiled, compiles=True),
        Backend("liger", _liger, package="liger_kernel", distribution="liger-kernel",
                needs_cuda=True),
        Backend("quack", _quack, package="quack", distribution="quack-kernels",
                needs_cuda=True, min_capability=(9, 0)),
    )
}
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def label(backend: str, compile_mode: str | None) -> str:
    """How results name a backend: "compiled:max-autotune" for each compile mode."""
    return f"{backend}:{compile_mode}" if compile_mode else backend


@cache
def optional_versions() -> dict[str, dict[str, str]]:
    """Installed optional backends, as OSS `dependencies` entries."""
    return {backend.distribution: {"version": version}
            for backend in BACKENDS.values()
            if backend.distribution and (version := backend.version())}
