"""What is measured: benchmark definitions and their expansion over modes into programs.

A definition is a Python statement (with setup code building its inputs), an `nn.Module`
built by an expression and called as its signature says, or one variant of a group. Each is
expanded over runtime mode (eager, TorchScript), autograd mode (forward, forward+backward)
and thread count; one expansion is a `Benchmark`, which becomes a `Program`: code strings
that run the same in this process, in a worker, and in callgrind's own Python process.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import Any

RUNTIMES = ("eager", "torchscript")
AUTOGRAD_MODES = ("forward", "forward_backward")
MODEL = "model"  # the name setup code and statements use for a definition's module
_PREFIX = "_bench_"  # names of the code added around a definition's own code
_SIGNATURE = re.compile(r"^\s*f\s*\(\s*(?P<inputs>[^)]*)\)\s*->\s*(?P<output>\w+)\s*$")


@dataclass(frozen=True)
class Signature:
    """`f(x, w) -> y`: the tensors a statement reads, and the name it assigns its result to."""

    inputs: tuple[str, ...]
    output: str

    @classmethod
    def parse(cls, text: str) -> Signature:
        match = _SIGNATURE.match(text)
        if match is None:
            raise ValueError(f"{text!r} is not of the form 'f(x, w) -> y'")
        inputs = tuple(name.strip() for name in match["inputs"].split(",") if name.strip())
        bad = [name for name in (*inputs, match["output"]) if not name.isidentifier()
               or name.startswith(_PREFIX) or name == MODEL]
        if bad:
            raise ValueError(f"{text!r}: {', '.join(map(repr, bad))} cannot be used as names")
        return cls(inputs, match["output"])

    def __str__(self) -> str:
        return f"f({', '.join(self.inputs)}) -> {self.output}"


@dataclass(frozen=True)
class Definition:
    """One benchmark: `stmt` after `setup`, or `model` (an expression) called on the
    signature's inputs. A variant's name is "group/variant"."""

    name: str
    setup: str = ""
    stmt: str = ""
    model: str = ""
    signature: Signature | None = None
    threads: tuple[int, ...] = (1,)  # thread counts it is measured with, unless a spec says
    number: int | None = None  # calls per count, for programs too large for the default
    timeout_s: float | None = None  # this definition's own limit per measurement

    @property
    def kind(self) -> str:
        return "model" if self.model else "statement"

    def forward(self) -> str:
        if self.model:
            assert self.signature is not None
            return f"{self.signature.output} = {MODEL}({', '.join(self.signature.inputs)})"
        return self.stmt

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "setup": self.setup, "stmt": self.stmt, "model": self.model,
                "signature": str(self.signature) if self.signature else None,
                "threads": list(self.threads), "number": self.number,
                "timeout_s": self.timeout_s}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Definition:
        signature = data.get("signature")
        return cls(**{**data, "signature": Signature.parse(signature) if signature else None,
                      "threads": tuple(data["threads"])})


def variants(name: str, stmts: dict[str, str], **common: Any) -> list[Definition]:
    """A group of named variants of one benchmark: one definition per variant."""
    return [Definition(f"{name}/{variant}", stmt=stmt, **common)
            for variant, stmt in stmts.items()]


@dataclass(frozen=True)
class Program:
    """A benchmark as code: `setup` then `torchscript` (which converts the code to TorchScript
    or raises) are run once; `forward` then `backward` are what is counted."""

    setup: str
    torchscript: str
    forward: str
    backward: str

    @property
    def stmt(self) -> str:
        return "\n".join(part for part in (self.forward, self.backward) if part)

    @property
    def full_setup(self) -> str:
        return "\n".join(part for part in (self.setup, self.torchscript) if part)


def benchmark_key(name: str, runtime: str, autograd: str, threads: int) -> str:
    """How an expansion is named in listings, filters, job cells and dashboards."""
    return f"{name} [{runtime}, {autograd}, {threads} thread{'s' if threads != 1 else ''}]"


@dataclass(frozen=True)
class Benchmark:
    """One expansion of a definition: the unit the runner schedules (one cell)."""

    definition: Definition
    runtime: str = "eager"
    autograd: str = "forward"
    threads: int = 1

    @property
    def key(self) -> str:
        return benchmark_key(self.definition.name, self.runtime, self.autograd, self.threads)

    @property
    def timeout_s(self) -> float | None:
        return self.definition.timeout_s

    def to_dict(self) -> dict[str, Any]:
        return {"definition": self.definition.to_dict(), "runtime": self.runtime,
                "autograd": self.autograd, "threads": self.threads}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Benchmark:
        return cls(**{**data, "definition": Definition.from_dict(data["definition"])})

    def cannot_run(self) -> str | None:
        """Why this expansion cannot be built from its definition; None when it can."""
        if self.definition.signature is None:
            if self.runtime == "torchscript":
                return "TorchScript needs a signature naming the statement's inputs and output"
            if self.autograd == "forward_backward":
                return "forward+backward needs a signature naming the statement's output"
        return None

    def program(self) -> Program:
        definition, signature = self.definition, self.definition.signature
        setup = definition.setup
        if definition.model:
            setup = f"{setup}\n{MODEL} = {definition.model}".lstrip("\n")
        backward = ""
        if self.autograd == "forward_backward":
            assert signature is not None
            backward = f"{signature.output}.sum().backward()"
            if not definition.model:  # a model's parameters already require grad
                setup += _requires_grad(signature.inputs)
        torchscript, forward = "", definition.forward()
        if self.runtime == "torchscript":
            assert signature is not None
            torchscript, forward = _torchscript(definition, signature)
        return Program(setup, torchscript, forward, backward)


def _requires_grad(inputs: tuple[str, ...]) -> str:
    if not inputs:
        return ""
    names = ", ".join(inputs) + ("," if len(inputs) == 1 else "")
    return textwrap.dedent(f"""
        for {_PREFIX}input in ({names}):
            if isinstance({_PREFIX}input, torch.Tensor) and {_PREFIX}input.is_floating_point():
                {_PREFIX}input.requires_grad_()""")


def _torchscript(definition: Definition, signature: Signature) -> tuple[str, str]:
    """Code replacing the eager callable by a scripted one (traced where scripting fails),
    raising when neither works; and the statement calling it."""
    args = ", ".join(signature.inputs)
    example = f"({args}{',' if len(signature.inputs) == 1 else ''})"
    if definition.model:
        target, eager, call = MODEL, MODEL, definition.forward()
        script = f"torch.jit.script({MODEL})"
        prelude = ""
    else:
        target = eager = f"{_PREFIX}fn"
        call = f"{signature.output} = {target}({args})"
        source = (f"def {eager}({args}):\n{textwrap.indent(definition.stmt, '    ')}\n"
                  f"    return {signature.output}\n")
        script = f"torch.jit.CompilationUnit({source!r}).{eager}"
        # The Python function, for tracing (which needs a module name to qualify it by).
        prelude = f"{source}{eager}.__module__ = '__main__'\n"
    code = prelude + textwrap.dedent(f"""\
        def {_PREFIX}first_line(error):
            return (str(error).strip().splitlines() or [type(error).__name__])[0]
        try:
            {target} = {script}
        except Exception as {_PREFIX}script_error:
            try:
                {target} = torch.jit.trace({eager}, {example})
            except Exception as {_PREFIX}trace_error:
                raise RuntimeError(
                    f"cannot be scripted ({{{_PREFIX}first_line({_PREFIX}script_error)}}) "
                    f"or traced ({{{_PREFIX}first_line({_PREFIX}trace_error)}})"
                ) from None""")
    return code, call


def expand(definitions: list[Definition], runtimes: tuple[str, ...] = RUNTIMES,
           autograd: tuple[str, ...] = AUTOGRAD_MODES,
           threads: tuple[int, ...] | None = None) -> list[Benchmark]:
    """Every definition in every mode; `threads` replaces each definition's own counts."""
    return [Benchmark(definition, runtime, mode, count) for definition in definitions
            for runtime in runtimes for mode in autograd
            for count in (threads or definition.threads)]
