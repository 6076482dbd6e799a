"""Stored results as the catalog shows them: each recipe's latest speedup per device, and
where a config's latest results are. Data only: the pages make links of it.

Both read RunSummary (one row per run and slice, with the log-sum for geomeans), so they
never scan results (and the newest runs are found from `SummarySlice`, not by scanning every
run's summaries): a recipe's speedup on a device is the geomean over shapes of its latest
run there, like the quantization page's geomean table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from benchsite.catalog.models import BenchmarkConfig
from benchsite.results.ingest.summaries import SLICE
from benchsite.results.models import RunSummary, SummarySlice
from runner.contract.names import QUANT_BENCHMARK, QuantMetric

PREFERRED_MODE = "max-autotune"  # the quantization page's default compile mode
JOBS_SEARCHED = 20  # a config's latest jobs looked at for results


@dataclass(frozen=True)
class Commit:
    """Where results are: a commit of a repo, on a device (its arch)."""

    repo: str
    branch: str
    sha: str
    arch: str


@dataclass(frozen=True)
class Speedup:
    geomean: float
    shapes: int
    at: Commit  # the run it comes from
    compile_mode: str


def latest_speedups() -> dict[str, dict[str, Speedup]]:
    """recipe label -> device (its arch, else its type) -> the latest geomean speedup."""
    speedups_of = {"benchmark": QUANT_BENCHMARK, "metric": QuantMetric.SPEEDUP}
    slices = list(SummarySlice.objects.filter(**speedups_of).values())
    newest: dict[tuple[str, str, str], datetime] = {}
    for row in slices:
        key = (row["dtype"], row["device"], row["arch"])
        newest[key] = max(newest.get(key, row["last_at"]), row["last_at"])
    # The summaries of the newest runs are those of the slices whose newest run it is, read
    # by repo, benchmark, metric and time (an index), never by scanning every run's.
    groups = Q()
    for row in slices:
        if row["last_at"] == newest[row["dtype"], row["device"], row["arch"]]:
            groups |= Q(**{column: row[column] for column in SLICE}, timestamp=row["last_at"])
    if not groups:
        return {}
    best: dict[tuple[str, str], RunSummary] = {}
    summaries = (RunSummary.objects.filter(groups, **speedups_of, log_count__gt=0)
                 .select_related("run"))
    for summary in summaries:
        key = (summary.dtype, summary.arch or summary.device)
        if key not in best or _preference(summary) > _preference(best[key]):
            best[key] = summary
    speedups: dict[str, dict[str, Speedup]] = {}
    for (label, device), summary in best.items():
        run = summary.run
        speedups.setdefault(label, {})[device] = Speedup(
            geomean=math.exp(summary.log_sum / summary.log_count), shapes=summary.log_count,
            at=Commit(run.repo, run.head_branch, run.head_sha, summary.arch),
            compile_mode=summary.compile_mode)
    return speedups


def _preference(summary: RunSummary) -> tuple[bool, int]:
    return summary.compile_mode == PREFERRED_MODE, summary.log_count


def latest_commit(config: BenchmarkConfig) -> Commit | None:
    """The commit and device of the config's latest job with results: the runs its cells'
    uploads created."""
    for job in config.jobs.exclude(cells_done=0).order_by("-created_at")[:JOBS_SEARCHED]:
        summary = (RunSummary.objects.filter(run__upload__jobcell__job=job,
                                             benchmark=QUANT_BENCHMARK)
                   .order_by("-timestamp").first())
        if summary is not None:
            return Commit(job.repo, job.head_branch, job.head_sha, summary.arch)
    return None
