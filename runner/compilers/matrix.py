"""Configurations: one model under one backend, test (eval/train) and dtype on one device,
and the expansion of a matrix into them, filtered by model-name regexes.

Backends are torch.compile's (`inductor`, `inductor_max_autotune`: inductor with
mode="max-autotune", `aot_eager`), `eager` (no compilation; the baseline of speedups and
memory ratios), or a dynamo backend function given as `module.path:function`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from typing import Any

from runner.compilers.models import FACTORY, ModelRef

EAGER = "eager"
BACKENDS = {  # name -> (torch.compile backend, mode); eager compiles nothing
    EAGER: None,
    "inductor": ("inductor", None),
    "inductor_max_autotune": ("inductor", "max-autotune"),
    "aot_eager": ("aot_eager", None),
}
TESTS = ("eval", "train")
DTYPES = ("float32", "bfloat16", "float16")
DEVICES = ("cpu", "cuda")


def check_backend(name: str) -> None:
    if name not in BACKENDS and not FACTORY.match(name):
        raise ValueError(f"{name!r} is not one of {', '.join(BACKENDS)} nor a dynamo backend "
                         "given as module.path:function")


@dataclass(frozen=True)
class Config:
    model: ModelRef
    backend: str
    test: str
    dtype: str
    device: str
    batch_size: int | None  # None: the model's default
    repeat: int
    iterations_per_run: int
    verify: bool
    dump_pytorch_profiles: bool
    timeout_s: float
    output_dir: str
    threads: int | None = None  # CPU: torch threads; None: torch's default

    @property
    def effective_batch_size(self) -> int | None:
        return self.batch_size or self.model.batch_size

    @property
    def key(self) -> str:
        return key_of(self.model.suite, self.model.name, self.backend, self.test, self.dtype,
                      self.device, self.effective_batch_size)

    @property
    def file_stem(self) -> str:
        return re.sub(r"[^A-Za-z0-9.+-]+", "_", "-".join(self.key.split("/")[2:]))

    def baseline(self) -> Config:
        """The eager configuration this one's speedup and memory ratio compare against."""
        return replace(self, backend=EAGER, verify=False, dump_pytorch_profiles=False)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        return cls(**{**data, "model": ModelRef(**data["model"])})


def key_of(suite: str, model: str, backend: str, test: str, dtype: str, device: str,
           batch_size: int | None) -> str:
    """Identifies a configuration, in job pages and in results.jsonl (what a resumed run
    skips)."""
    size = "default" if batch_size is None else batch_size
    return "/".join([suite, model, backend, test, dtype, device, f"bs{size}"])


def selected(name: str, filters: list[str], excludes: list[str]) -> bool:
    """Seed 001's rule: a model runs when a --filter regex matches its name (any, when none is
    given) and no --exclude regex does; both are searched, case-insensitively."""
    def search(pattern: str) -> bool:
        return re.search(pattern, name, re.IGNORECASE) is not None

    return (not filters or any(map(search, filters))) and not any(map(search, excludes))


def expand(models: list[ModelRef], backends: list[str], tests: list[str], dtypes: list[str],
           filters: list[str], excludes: list[str], **settings: Any) -> list[Config]:
    """Every configuration, by model, then test and dtype; eager comes first among backends so
    the baseline of the others is measured before them."""
    backends = sorted(dict.fromkeys(backends), key=lambda b: b != EAGER)
    seen: set[str] = set()
    configs = []
    for model in models:
        if not selected(model.name, filters, excludes):
            continue
        for test in dict.fromkeys(tests):
            for dtype in dict.fromkeys(dtypes):
                for backend in backends:
                    config = Config(model=model, backend=backend, test=test, dtype=dtype,
                                    **settings)
                    if config.key not in seen:
                        seen.add(config.key)
                        configs.append(config)
    return configs
