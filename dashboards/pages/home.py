"""Home: the latest runs, each linked to its run page and its benchmarks' trends."""

from __future__ import annotations

from django.urls import reverse

from benchsite.results.models import Run, RunSummary
from dashboards.pages.common import page_url
from dashboards.render import Page, Table
from dashboards.state import State
from runner.contract.names import QUANT_BENCHMARK

LATEST = 40


def build(state: State) -> Page:
    runs = list(Run.objects.order_by("-timestamp")[:LATEST])
    benchmarks: dict[int, list[str]] = {}
    for run_id, benchmark in (RunSummary.objects.filter(run__in=runs)
                              .order_by().values_list("run_id", "benchmark").distinct()):
        benchmarks.setdefault(run_id, []).append(benchmark)
    table = Table("latest runs", ["run", "time", "repo", "branch", "commit", "job", "device",
                                  "benchmarks", "results"], [])
    for run in runs:
        names = sorted(benchmarks.get(run.pk, []))
        table.rows.append([run.pk, run.timestamp.strftime("%Y-%m-%d %H:%M"), run.repo,
                           run.head_branch, run.head_sha[:10], run.name, run.arch or run.device,
                           ", ".join(names), run.result_count])
        first = names[0] if names else ""
        trend = (page_url("dashboards:quantization", repo=run.repo, sha=run.head_sha,
                          arch=run.arch) if first == QUANT_BENCHMARK
                 else page_url("dashboards:trends", repo=run.repo, benchmark=first))
        table.links.append({0: reverse("dashboards:run", args=[run.pk]), 7: trend})
    return Page(title="Benchmarks", filters={}, tables=[table])
