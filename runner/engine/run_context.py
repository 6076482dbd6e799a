"""The machine and software a run happened on, as OSS benchmark `runners` and `dependencies`."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from runner.engine.machine_state import machine_state

GB = 1024**3
IMAGE_VARIABLE = "BENCH_IMAGE_DIGEST"


@dataclass(frozen=True)
class RunContext:
    cpu_info: str
    cpu_count: int
    mem_gb: float | None
    avail_mem_gb: float | None
    gpu_info: str | None
    gpu_count: int
    gpu_mem_gb: float | None
    avail_gpu_mem_gb: float | None
    gpu_capability: str | None
    torch_version: str
    torch_sha: str | None
    cuda_version: str | None
    torchao_version: str | None
    # runner.engine.machine_state.machine_state when the run started
    machine: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def collect(cls) -> RunContext:
        import torch  # torch: the CLI imports this module for --dry-run too

        gpu: dict[str, Any] = {"gpu_info": None, "gpu_mem_gb": None, "avail_gpu_mem_gb": None,
                               "gpu_capability": None}
        if torch.cuda.is_available():
            free, total = torch.cuda.mem_get_info()
            major, minor = torch.cuda.get_device_capability()
            gpu = {
                "gpu_info": torch.cuda.get_device_name(),
                "gpu_mem_gb": round(total / GB, 2),
                "avail_gpu_mem_gb": round(free / GB, 2),
                "gpu_capability": f"{major}.{minor}",
            }
        return cls(
            cpu_info=_cpu_model(),
            cpu_count=os.cpu_count() or 0,
            mem_gb=_memory_gb("SC_PHYS_PAGES"),
            avail_mem_gb=_memory_gb("SC_AVPHYS_PAGES"),
            gpu_count=torch.cuda.device_count() if torch.cuda.is_available() else 0,
            torch_version=torch.__version__,
            torch_sha=getattr(torch.version, "git_version", None),
            cuda_version=torch.version.cuda,
            torchao_version=_version("torchao"),
            machine=machine_state("cuda" if torch.cuda.is_available() else "cpu"),
            **gpu,
        )

    def arch(self, device: str) -> str:
        """What the HUD calls arch: the GPU model for CUDA, else the CPU model."""
        return (self.gpu_info or "unknown GPU") if device == "cuda" else self.cpu_info

    def runners(self, device: str) -> list[dict[str, Any]]:
        return [
            {
                "name": device,
                "type": self.arch(device),
                "cpu_info": self.cpu_info,
                "cpu_count": self.cpu_count,
                "mem_info": f"{self.mem_gb} GB" if self.mem_gb is not None else "unknown",
                "avail_mem_in_gb": self.avail_mem_gb,
                "gpu_info": self.gpu_info or "",
                "gpu_count": self.gpu_count,
                "gpu_mem_info": f"{self.gpu_mem_gb} GB" if self.gpu_mem_gb is not None else "",
                "avail_gpu_mem_in_gb": self.avail_gpu_mem_gb,
                "extra_info": {
                    "gpu_capability": self.gpu_capability,
                    "platform": platform.platform(),
                    "python": platform.python_version(),
                    "machine_at_start": self.machine,
                    # the container the worker runs in, when its deployment says (the
                    # site's environment fingerprint tells images apart by it)
                    **({"image_digest": image} if (image := os.environ.get(IMAGE_VARIABLE))
                       else {}),
                },
            }
        ]

    def dependencies(self) -> dict[str, Any]:
        return {
            "torch": {
                "repo": "pytorch/pytorch",
                "version": self.torch_version,
                "sha": self.torch_sha,
                "extra_info": {"cuda": self.cuda_version},
            },
            "torchao": {"repo": "pytorch/ao", "version": self.torchao_version},
        }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gb(pages_name: str) -> float | None:
    try:
        return round(os.sysconf(pages_name) * os.sysconf("SC_PAGE_SIZE") / GB, 2)
    except (ValueError, OSError, AttributeError):
        return None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None
