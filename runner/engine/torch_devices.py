"""What every family that runs torch on a device needs: whether it can run there, and
giving memory back after a cell (imports torch)."""

from __future__ import annotations

import gc

import torch


def device_problem(device: str) -> str | None:
    """Why cells cannot run on `device` here; None when they can."""
    if device == "cpu":
        return None
    if device == "cuda":
        return None if torch.cuda.is_available() else "CUDA is not available on this machine"
    return f"the runner measures on cuda and cpu, not {device}"


def release_memory() -> None:
    """Free what a failed cell's traceback held, and give cached CUDA blocks back."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
