"""Stored results as the catalog shows them: each recipe's latest speedup per device, and a
config's latest results on the quantization dashboard.

Both read RunSummary (one row per run and slice, with the log-sum for geomeans), so they
never scan results: a recipe's speedup on a device is the geomean over shapes of its latest
run there, like the quantization page's geomean table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.db.models import Max, Q
from django.urls import reverse

from benchsite.catalog.models import BenchmarkConfig
from benchsite.results.models import RunSummary
from dashboards.pages.common import page_url
from dashboards.pages.quantization import BENCHMARK, SPEEDUP

PREFERRED_MODE = "max-autotune"  # the quantization page's default compile mode


@dataclass(frozen=True)
class Speedup:
    geomean: float
    shapes: int
    compile_mode: str
    url: str  # the run on the quantization page


def latest_speedups() -> dict[str, dict[str, Speedup]]:
    """recipe label -> device (its arch, else its type) -> the latest geomean speedup."""
    latest = (RunSummary.objects.filter(benchmark=BENCHMARK, metric=SPEEDUP)
              .values("dtype", "device", "arch").annotate(at=Max("timestamp")).order_by())
    groups = Q()
    for row in latest:
        groups |= Q(dtype=row["dtype"], device=row["device"], arch=row["arch"],
                    timestamp=row["at"])
    if not groups:
        return {}
    best: dict[tuple[str, str], RunSummary] = {}
    summaries = (RunSummary.objects.filter(groups, benchmark=BENCHMARK, metric=SPEEDUP,
                                           log_count__gt=0).select_related("run"))
    for summary in summaries:
        key = (summary.dtype, summary.arch or summary.device)
        if key not in best or _preference(summary) > _preference(best[key]):
            best[key] = summary
    speedups: dict[str, dict[str, Speedup]] = {}
    for (label, device), summary in best.items():
        run = summary.run
        speedups.setdefault(label, {})[device] = Speedup(
            geomean=math.exp(summary.log_sum / summary.log_count), shapes=summary.log_count,
            compile_mode=summary.compile_mode,
            url=page_url(reverse("dashboards:quantization"), repo=run.repo,
                         branch=run.head_branch, sha=run.head_sha, arch=summary.arch,
                         compile_mode=summary.compile_mode))
    return speedups


def _preference(summary: RunSummary) -> tuple[bool, int]:
    return summary.compile_mode == PREFERRED_MODE, summary.log_count


def latest_results_url(config: BenchmarkConfig) -> str | None:
    """The quantization page showing the results of the config's latest job that has any."""
    for job in config.jobs.exclude(cells_done=0).order_by("-created_at")[:20]:
        summary = (RunSummary.objects.filter(run__repo=job.repo, run__head_sha=job.head_sha,
                                             run__workflow_id=job.pk, benchmark=BENCHMARK)
                   .order_by("-timestamp").first())
        if summary is not None:
            return page_url(reverse("dashboards:quantization"), repo=job.repo,
                            branch=job.head_branch, sha=job.head_sha, arch=summary.arch)
    return None
