"""Run page: where a run came from (commit, CI job, machine), the commands that reproduce it
(a job's cells), and every result it holds, a page at a time (each benchmark's headline
metric first), narrowed by benchmark, metric and model."""

from __future__ import annotations

import re

from django.db.models import Case, Count, Q, When
from django.shortcuts import get_object_or_404
from django.urls import reverse

from benchsite.jobs.models import JobCell
from benchsite.results.models import EnvironmentChange, Result, Run, repetitions
from dashboards import families, repro
from dashboards.identity import DIMENSIONS, identity_columns
from dashboards.pages.common import (
    interval_of,
    measured_text,
    page_url,
    sanity_verdict,
    spread_text,
    suspect_of,
)
from dashboards.paging import paged
from dashboards.render import Page, Table
from dashboards.state import State
from runner.contract.names import QUANT_BASELINE_RECIPE, QUANT_BENCHMARK, QuantMetric
from runner.contract.repos import is_repo

SPEEDUPS = [QuantMetric.SPEEDUP, QuantMetric.EAGER_SPEEDUP, QuantMetric.COMPILED_SPEEDUP]


def job_of(run: Run) -> int | None:
    """The benchsite job whose cell's upload created the run, if a job did."""
    return JobCell.objects.filter(upload_id=run.upload_id).values_list("job_id",
                                                                       flat=True).first()


def links(run: Run) -> dict[str, str]:
    """Where to see the commit and the job (ours, or a CI job) that produced the run."""
    found = {}
    if is_repo(run.repo) and re.fullmatch(r"[0-9a-f]{7,40}", run.head_sha):
        found["commit"] = f"https://github.com/{run.repo}/commit/{run.head_sha}"
    if job := job_of(run):
        found["job"] = reverse("jobs:detail", args=[job])
        found["job_text"] = f"job {job}"
    elif run.workflow_id and is_repo(run.repo):  # runs stored before names were checked
        found["job"] = f"https://github.com/{run.repo}/actions/runs/{run.workflow_id}" + (
            f"/job/{run.job_id}" if run.job_id else "")
        found["job_text"] = (f"job {run.workflow_id}" + (f"/{run.job_id}" if run.job_id else "")
                             + f", attempt {run.run_attempt}")
    return found


def sanity_warnings(run: Run) -> list[str]:
    """A warning for each speedup of the quantization baseline recipe (bf16 timed against
    itself) whose interval excludes 1.00: the run's timings are then suspect."""
    rows = Result.objects.of_run(run).in_slice(
        benchmark=QUANT_BENCHMARK, dtype=QUANT_BASELINE_RECIPE, metric=SPEEDUPS,
    ).order_by("series__model", "series__metric").values_list(
        "series__model", "series__metric", "value", "extra_info")
    warnings = []
    for model, metric, value, info in rows:
        if value is None:
            continue
        interval = interval_of(info)
        suspect, verdict = sanity_verdict(value, interval)
        if suspect:
            warnings.append(f"Sanity check (baseline vs baseline) {model}, {metric}: "
                            f"{measured_text(value, interval)}: {verdict}")
    return warnings


def speedup_stability(run: Run) -> dict[str, int]:
    """How many of the run's results carry a measured interval, and how many of those are
    unstable (the interval stayed wider than the runner's target)."""
    return Result.objects.of_run(run).aggregate(
        measured=Count("id", filter=Q(extra_info__has_key="unstable")),
        unstable=Count("id", filter=Q(extra_info__unstable=True)))


def environment_change(run: Run) -> EnvironmentChange | None:
    """The change of environment the run is the first run after, with the run before it."""
    return (EnvironmentChange.objects.filter(after_run=run)
            .select_related("before_run").only(
                "summary", "changes", "at", "after_run_id", "before_run__head_sha",
                "before_run__timestamp").first())


ROW_FIELDS = ("series__benchmark", "series__model", "series__metric", "value", "values",
              "extra_info", "target", "series_id", "string_values")


def build(state: State, pk: int) -> Page:
    run = get_object_or_404(Run, pk=pk)
    results = Result.objects.of_run(run)
    kinds = sorted(results.order_by().values_list("series__benchmark", "series__metric")
                   .distinct())
    benchmark = state.choice("benchmark", ["", *sorted({b for b, _ in kinds})])
    metrics = sorted({m for b, m in kinds if not benchmark or b == benchmark})
    metric = state.choice("metric", ["", *metrics])
    model = state.text("model")
    chosen = {"series__benchmark": benchmark, "series__metric": metric,
              "series__model__icontains": model}
    headlines = [page.headline for page in families.pages()]
    headline = Case(When(series__metric__in=headlines, then=0), default=1)
    chosen_results = results.filter(**{k: v for k, v in chosen.items() if v})
    dimensions, identities = identity_columns(chosen_results.values("series_id"))
    order = chosen_results.order_by(
        "series__benchmark", headline, "series__metric", "series__model",
        *(f"series__{name}" for name in DIMENSIONS), "series__identity", "id")
    # The order of all the run's results (their ids), paged here, then the page's rows: asked
    # for one page (LIMIT 50), the planner guessed the run's size from the table's average
    # (3,740 results at 10.7M, for a run of 125), sorted every series and probed each for
    # the run's results (255 ms). All of a run's results are an index range.
    page_ids, paging = paged(state, list(order.values_list("id", flat=True)))
    found = {row[0]: row[1:] for row in chosen_results.filter(pk__in=page_ids).values_list(
        "id", *ROW_FIELDS)}
    shown = [found[pk] for pk in page_ids]
    table = Table("results", ["benchmark", "model", "metric", "value", "spread", "target",
                              *dimensions, "string values"], [], paging=paging)
    explorer = reverse("dashboards:explorer")
    for *series, value, values, info, target, series_id, strings in shown:
        spread, suspect = spread_text(repetitions(values, value), info), suspect_of(info)
        if suspect:  # the number stays, marked and greyed like an unstable one
            spread = "; ".join(filter(None, [spread, suspect.describe()]))
        table.rows.append([*series, value, spread, target, *identities[series_id],
                           ", ".join(strings) if strings else None])
        if suspect:
            table.classes.append({"value": "noise", "spread": "spread suspect"})
        else:
            table.classes.append({"spread": "spread noise" if spread and "unstable" in spread
                                  else "spread"})
        table.links.append({"model": page_url(
            explorer, repo=run.repo, benchmark=series[0], model=series[1], metric=series[2],
            branch=run.head_branch, range="90d")})
    change = environment_change(run)
    reproduce = repro.for_run(run, state.request.build_absolute_uri)
    return Page(
        title=f"Run {run.pk}",
        filters={"run": run.pk, "benchmark": benchmark, "metric": metric, "model": model,
                 **paging.as_filters()},
        tables=[table, repro.table(reproduce)],
        context={"run": run, "links": links(run), "warnings": sanity_warnings(run),
                 "repros": reproduce,
                 "stability": speedup_stability(run), "state": state,
                 "benchmarks": sorted({b for b, _ in kinds}), "metrics": metrics,
                 "environment": sorted(run.environment.items()), "environment_change": change},
        data={"environment": run.environment, "environment_hash": run.environment_hash,
              "environment_change": change.as_json() if change else None},
    )
