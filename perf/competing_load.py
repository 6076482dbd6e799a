"""Competing CPU-bound processes that a timing script starts and stops itself, so that its
"loaded" figures come from a load it knows rather than from whatever else the machine runs."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from contextlib import contextmanager


def spin(stop) -> None:
    """One competing process: small matrix products (compute and cache traffic)."""
    import torch

    torch.set_num_threads(1)
    a = torch.randn(256, 256)
    while not stop.is_set():
        for _ in range(50):
            a = torch.tanh(a @ a)


@contextmanager
def competing(count: int) -> Iterator[None]:
    """`count` spinning processes for the duration of the block."""
    stop = multiprocessing.Event()
    workers = [multiprocessing.Process(target=spin, args=(stop,), daemon=True)
               for _ in range(count)]
    for worker in workers:
        worker.start()
    try:
        yield
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=10)


def loadavg() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())
