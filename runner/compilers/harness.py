"""A configuration's model made ready to run: seeded, cast, placed, compiled, and its step.

A step is one iteration: eval is a forward pass under no_grad; train is zero-grad, forward,
a scalar loss (the mean of every floating output), backward and an SGD step, with torch.compile
applied to the model (the optimizer step stays eager). `step(collect=True)` returns what the
verifier compares: the output for eval; output, loss and every parameter's gradient for train.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

from runner.compilers import models
from runner.compilers.matrix import BACKENDS, EAGER, Config

SEED = 1337
LEARNING_RATE = 0.01


def reset_rng() -> None:
    random.seed(SEED)
    torch.manual_seed(SEED)  # also seeds every CUDA device


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


@dataclass
class Prepared:
    model: torch.nn.Module
    inputs: tuple
    step: Callable[[bool], Any]


def prepare(config: Config, backend: str | None = None, dtype: str | None = None) -> Prepared:
    """The configuration's model, or the same model under another backend or dtype (the
    verifier's eager runs and float64 reference)."""
    backend = backend or config.backend
    torch_dtype = getattr(torch, dtype or config.dtype)
    if config.threads:
        torch.set_num_threads(config.threads)
    reset_rng()
    model, inputs = models.load(config.model, config.batch_size, config.test, config.device)
    model = model.to(device=config.device, dtype=torch_dtype)
    inputs = pytree.tree_map_only(torch.Tensor, lambda t: _place(t, config.device, torch_dtype),
                                  inputs)
    runnable = _compile(model, backend)
    if config.test == "eval":
        model.eval()

        def step(collect: bool = False) -> Any:
            with torch.no_grad():
                return runnable(*inputs)

        return Prepared(model, inputs, step)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)

    def train_step(collect: bool = False) -> Any:
        optimizer.zero_grad(set_to_none=True)
        output = runnable(*inputs)
        loss = _loss(output)
        loss.backward()
        result = ([output, loss.detach(), [p.grad for p in model.parameters()]] if collect
                  else loss.detach())
        optimizer.step()
        return result

    return Prepared(model, inputs, train_step)


def _place(tensor: torch.Tensor, device: str, dtype: torch.dtype) -> torch.Tensor:
    tensor = tensor.to(device)
    return tensor.to(dtype) if tensor.is_floating_point() else tensor


def _compile(model: torch.nn.Module, backend: str) -> Callable:
    if backend == EAGER:
        return model
    torch._dynamo.reset()  # a fresh cache: earlier models of this process must not count
    if backend in BACKENDS:
        name, mode = BACKENDS[backend]
        return torch.compile(model, backend=name, mode=mode)
    module, _, function = backend.partition(":")
    return torch.compile(model, backend=getattr(importlib.import_module(module), function))


def _loss(output: Any) -> torch.Tensor:
    leaves = [t for t in pytree.tree_leaves(output)
              if isinstance(t, torch.Tensor) and t.is_floating_point()]
    if not leaves:
        raise TypeError("train: the model's output has no floating-point tensor to reduce to a "
                        "loss")
    return sum(t.sum() / t.numel() for t in leaves) / len(leaves)
