"""Which models a matrix runs: the built-in suite, users' own factories, TorchBench.

A model is named without importing torch (specs are checked before anything runs):

- a suite: `builtin` (every built-in model) or `torchbench` (every TorchBench model, when
  the `torchbenchmark` package is installed; otherwise the suite is absent and a warning
  says so);
- a built-in model by name (`mlp`), or one TorchBench model as `torchbench/NAME`;
- a user's factory as `package.module:function`: called with `batch_size=` when it takes
  that argument, it returns `(model, example_inputs)`; the model is named after the function
  and belongs to the `custom` suite.

`load` builds one, in the child process, after the harness has seeded torch.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

BUILTIN, TORCHBENCH, CUSTOM = "builtin", "torchbench", "custom"
# name -> default batch size; the factory is the function of that name in runner.compilers.suite
BUILTIN_MODELS = {"mlp": 8, "cnn": 4, "resnet_blocks": 4, "transformer_encoder": 4, "lstm": 4,
                  "recommender": 16}
FACTORY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


@dataclass(frozen=True)
class ModelRef:
    suite: str
    name: str
    factory: str | None = None  # "module:function"; None for TorchBench
    batch_size: int | None = None  # the default when a configuration names none
    tolerance: float | None = None  # verifier tolerance; None: the seed's default for the test
    cosine: bool = False  # verify with cosine similarity instead of allclose/RMSE
    skip_verifier: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def builtin(name: str) -> ModelRef:
    return ModelRef(BUILTIN, name, f"runner.compilers.suite:{name}", BUILTIN_MODELS[name])


def custom(factory: str, **options: Any) -> ModelRef:
    name = options.pop("name", None) or factory.rsplit(":", 1)[1]
    return ModelRef(CUSTOM, name, factory, **options)


def torchbench_names() -> list[str] | None:
    """TorchBench's model names, from its package directory (nothing imported); None when
    `torchbenchmark` is not installed."""
    spec = importlib.util.find_spec("torchbenchmark")
    if spec is None or not spec.submodule_search_locations:
        return None
    names = set()
    for location in spec.submodule_search_locations:
        models = Path(location) / "models"
        if models.is_dir():
            names |= {path.name for path in models.iterdir()
                      if path.is_dir() and (path / "__init__.py").exists()}
    return sorted(names)


def resolve(entry: str) -> list[ModelRef]:
    """The models an entry names; ValueError saying why when it names none."""
    if entry == BUILTIN:
        return [builtin(name) for name in BUILTIN_MODELS]
    if entry in BUILTIN_MODELS:
        return [builtin(entry)]
    if entry == TORCHBENCH or entry.startswith(f"{TORCHBENCH}/"):
        names = torchbench_names()
        if names is None:
            logger.warning("%s: the torchbenchmark package is not installed, so the TorchBench "
                           "suite is absent and its models are skipped", entry)
            return []
        wanted = entry.partition("/")[2]
        if wanted and wanted not in names:
            raise ValueError(f"{wanted!r} is not a TorchBench model")
        return [ModelRef(TORCHBENCH, name) for name in names if not wanted or name == wanted]
    if FACTORY.match(entry):
        return [custom(entry)]
    raise ValueError(f"{entry!r} is not a suite ({BUILTIN}, {TORCHBENCH}), a built-in model "
                     f"({', '.join(BUILTIN_MODELS)}), torchbench/NAME or module.path:factory")


def load(ref: ModelRef, batch_size: int | None, test: str, device: str) -> tuple[Any, tuple]:
    """(model, example inputs as a tuple) on the CPU, or on `device` for TorchBench."""
    if ref.suite == TORCHBENCH:
        return _torchbench(ref.name, batch_size, test, device)
    module_name, _, attribute = (ref.factory or "").partition(":")
    factory = getattr(importlib.import_module(module_name), attribute)
    size = batch_size or ref.batch_size
    takes_size = "batch_size" in inspect.signature(factory).parameters
    if size is not None and not takes_size:
        raise TypeError(f"{ref.factory}: a batch size was asked for but the factory takes no "
                        "batch_size argument")
    made = factory(batch_size=size) if size is not None else factory()
    if not (isinstance(made, tuple) and len(made) == 2):
        raise TypeError(f"{ref.factory}: must return (model, example_inputs), not "
                        f"{type(made).__name__}")
    model, inputs = made
    return model, tuple(inputs) if isinstance(inputs, list | tuple) else (inputs,)


def _torchbench(name: str, batch_size: int | None, test: str, device: str) -> tuple[Any, tuple]:
    from torchbenchmark import load_model_by_name  # optional: only for torchbench/ models

    benchmark = load_model_by_name(name)(test=test, device=device, batch_size=batch_size)
    model, inputs = benchmark.get_module()
    return model, tuple(inputs)
