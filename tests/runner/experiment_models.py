"""Crafted models and backends for the experiment matrix tests: each produces one situation
(a verification code, a crash, a hang). Imported by the child processes too."""

from __future__ import annotations

import itertools
import os
import time

import torch
from torch import nn

_calls = itertools.count()


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.linear(x))


class Drifting(Tiny):
    """Eager gives another answer each call: the verifier cannot judge it."""

    def forward(self, x):
        return super().forward(x) + next(_calls)


class Broken(Tiny):
    def forward(self, x):
        raise RuntimeError("this model is broken in eager")


class Hanging(Tiny):
    def forward(self, x):
        time.sleep(600)


class Crashing(Tiny):
    def forward(self, x):
        os._exit(3)


def tiny(batch_size: int = 2):
    return Tiny(), (torch.randn(batch_size, 4),)


def drifting():
    return Drifting(), (torch.randn(2, 4),)


def broken():
    return Broken(), (torch.randn(2, 4),)


def hanging():
    return Hanging(), (torch.randn(2, 4),)


def crashing():
    return Crashing(), (torch.randn(2, 4),)


def not_a_pair():
    return Tiny()


def raising_backend(graph, example_inputs):
    raise RuntimeError("this backend cannot compile anything")


def wrong_backend(graph, example_inputs):
    """Runs the graph and returns outputs 50% too large."""
    def run(*args):
        outputs = graph(*args)
        return type(outputs)(t * 1.5 if isinstance(t, torch.Tensor) and t.is_floating_point()
                             else t for t in outputs)

    return run
