"""Freed memory kept by a web process for its next request (glibc's malloc).

By default glibc gives large blocks (over 128 KiB, a threshold it raises as such blocks are
freed) and the free top of its heap back to the system, and the next request faults their
pages in again: an upload of 5,000 records (2.5 MB of JSON) faulted in 640 pages, about
1.9 ms of its 45 on a 2-core VM (a fault costs ~3 us there). With the thresholds set here,
blocks under 32 MiB (glibc's maximum) come from the heap and stay there for the next request,
which faulted in 6 pages; the heap is trimmed only beyond 128 MiB free, so one very large
upload does not keep its memory for good. Not in the Celery workers: they time CPU
benchmarks in their own process, and how its memory comes and goes is part of what those
measure (a change there would be a step in every CPU history)."""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 2**20
TRIM_THRESHOLD = 128 * 2**20


def keep_freed_memory() -> bool:
    """Set glibc's thresholds in this process (and the processes it forks); whether it could
    (not where the C library is another: musl, macOS)."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
