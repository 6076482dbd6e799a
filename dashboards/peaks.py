"""Peak memory bandwidth of the accelerators the benchmarks name, from their makers' data
sheets, so that a kernel's GB/s reads as a share of what the device can move.

Devices are named as records name them (`torch.cuda.get_device_name()`: "NVIDIA H100 80GB
HBM3", "NVIDIA A100-SXM4-40GB"); one not listed has no peak, and the page says so."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Peak:
    model: str  # the device as the data sheet names it
    gbs: float  # GB/s (10^9 bytes per second), as the kernels' bandwidth is written


# Most specific first: the first pattern found in the device name wins.
PEAKS: tuple[tuple[str, Peak], ...] = (
    (r"GH200", Peak("GH200 (H100 96GB HBM3)", 4000)),
    (r"H200", Peak("H200 141GB HBM3e", 4800)),
    (r"H100.*NVL", Peak("H100 NVL 94GB HBM3", 3900)),
    (r"H100.*PCIe", Peak("H100 PCIe 80GB HBM2e", 2000)),
    (r"H100", Peak("H100 SXM5 80GB HBM3", 3350)),
    (r"B200", Peak("B200 HBM3e", 8000)),
    (r"A100.*PCIE.*40GB", Peak("A100 PCIe 40GB HBM2", 1555)),
    (r"A100.*80GB.*PCIe", Peak("A100 PCIe 80GB HBM2e", 1935)),
    (r"A100.*80GB", Peak("A100 SXM4 80GB HBM2e", 2039)),
    (r"A100", Peak("A100 40GB HBM2", 1555)),
    (r"L40S", Peak("L40S 48GB GDDR6", 864)),
    (r"\bL4\b", Peak("L4 24GB GDDR6", 300)),
    (r"A10G?\b", Peak("A10/A10G 24GB GDDR6", 600)),
    (r"\bT4\b", Peak("T4 16GB GDDR6", 320)),
    (r"V100", Peak("V100 HBM2", 900)),
    (r"MI300X", Peak("MI300X 192GB HBM3", 5300)),
    (r"MI250X", Peak("MI250X 128GB HBM2e", 3277)),
)


def peak_bandwidth(device: str) -> Peak | None:
    """The device's peak memory bandwidth; None for a device not listed (a CPU, a new GPU)."""
    for pattern, peak in PEAKS:
        if re.search(pattern, device, re.IGNORECASE):
            return peak
    return None
