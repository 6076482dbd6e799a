"""The kernels: their tensors, and the bytes a pass must move - the one place the formulas live.

Every kernel works on rows: x is (M, N), a reduction runs along N. Floating tensors have the
spec's dtype (itemsize s); class indices are int64 (8 bytes). Pure Python: the spec
validator, the CLI's listing and the demo data use it without torch.

Bytes are the traffic a perfectly fused kernel cannot avoid (as PyTorch's genai_layers
benchmarks count it), so bandwidth = bytes / median latency compares backends fairly:

- forward: read every input once, write the output once;
- backward: read the output's gradient and what the backward needs (`saved`: inputs, or the
  forward's output), write a gradient for every input that takes one.

Per-row statistics (mean, rstd, logsumexp) that an implementation may save or recompute are
not counted: they are M values against M x N, and depend on the implementation.

    kernel          forward                     backward
    cross_entropy   M*N*s + 8*M + M*s           2*M*N*s + 8*M + M*s
    softmax         2*M*N*s                     3*M*N*s
    rms_norm        2*M*N*s + N*s               3*M*N*s + 2*N*s
    layer_norm      2*M*N*s + N*s               3*M*N*s + 2*N*s
"""

from __future__ import annotations

from dataclasses import dataclass

FORWARD, BACKWARD = "forward", "backward"
DIRECTIONS = (FORWARD, BACKWARD)
EPS = 1e-6  # of both norms
INDEX_ITEMSIZE = 8  # int64 class indices
ITEMSIZES = {"float32": 4, "bfloat16": 2, "float16": 2}
DTYPES = tuple(ITEMSIZES)


@dataclass(frozen=True)
class Operand:
    name: str
    dims: str  # "MN", "M" or "N"
    index: bool = False  # int64 class indices, else a floating tensor of the spec's dtype

    def elements(self, m: int, n: int) -> int:
        return {"MN": m * n, "M": m, "N": n}[self.dims]

    def bytes(self, m: int, n: int, itemsize: int) -> int:
        return self.elements(m, n) * (INDEX_ITEMSIZE if self.index else itemsize)

    @property
    def term(self) -> str:
        count = {"MN": "M*N", "M": "M", "N": "N"}[self.dims]
        return f"{count}*{INDEX_ITEMSIZE if self.index else 's'}"


@dataclass(frozen=True)
class Kernel:
    name: str
    title: str
    inputs: tuple[Operand, ...]  # in the order every backend's function takes them
    output: Operand
    grads: tuple[str, ...]  # inputs the backward computes a gradient for
    saved: tuple[str, ...]  # inputs or the output the backward reads, besides the output's grad

    def operand(self, name: str) -> Operand:
        return next(item for item in (*self.inputs, self.output) if item.name == name)

    def traffic(self, direction: str) -> list[tuple[str, Operand]]:
        """What one pass reads and writes, e.g. ("read x", X), in the order of the formula."""
        if direction == FORWARD:
            return [*((f"read {o.name}", o) for o in self.inputs),
                    (f"write {self.output.name}", self.output)]
        if direction == BACKWARD:
            return [(f"read d{self.output.name}", self.output),
                    *((f"read {name}", self.operand(name)) for name in self.saved),
                    *((f"write d{name}", self.operand(name)) for name in self.grads)]
        raise ValueError(f"direction {direction!r}: must be one of {', '.join(DIRECTIONS)}")

    def bytes_moved(self, direction: str, m: int, n: int, itemsize: int) -> int:
        """Least bytes one pass reads and writes (see the module docstring)."""
        return sum(operand.bytes(m, n, itemsize) for _, operand in self.traffic(direction))

    def formula(self, direction: str) -> str:
        """The byte count as text, e.g. "read x (M*N*s) + write y (M*N*s)"."""
        return " + ".join(f"{what} ({operand.term})" for what, operand in self.traffic(direction))


X = Operand("x", "MN")
WEIGHT = Operand("weight", "N")
KERNELS = {
    kernel.name: kernel
    for kernel in (
        Kernel("cross_entropy", "cross entropy (per-row loss)",
               (X, Operand("target", "M", index=True)), Operand("loss", "M"),
               grads=("x",), saved=("x", "target")),
        Kernel("softmax", "softmax over the last dimension", (X,), Operand("y", "MN"),
               grads=("x",), saved=("y",)),
        Kernel("rms_norm", "RMSNorm with a weight", (X, WEIGHT), Operand("y", "MN"),
               grads=("x", "weight"), saved=("x", "weight")),
        Kernel("layer_norm", "LayerNorm with a weight, no bias", (X, WEIGHT),
               Operand("y", "MN"), grads=("x", "weight"), saved=("x", "weight")),
    )
}


def bytes_moved(kernel: str, direction: str, m: int, n: int, dtype: str) -> int:
    return KERNELS[kernel].bytes_moved(direction, m, n, ITEMSIZES[dtype])
