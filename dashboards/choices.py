"""What a filter may offer: distinct repos, benchmarks and summary columns among stored
results."""

from __future__ import annotations

from benchsite.results.models import RunSummary, SummarySlice


def slice_options(columns: tuple[str, ...], **filters) -> dict[str, list[str]]:
    """Distinct values of several slice columns (repo, branch or a RunSummary group column)
    among the slices matching `filters`, in one scan of `SummarySlice` (427 rows at 10M
    results, where the series table's 29,621 took 7-10 ms a page)."""
    rows = SummarySlice.objects.filter(**filters).order_by().values_list(*columns).distinct()
    return {column: sorted({row[i] for row in rows}) for i, column in enumerate(columns)}


def repos_and_benchmarks(repo: str | None = None) -> tuple[list[str], list[str]]:
    """All repos with results, and the benchmarks of `repo` (every benchmark when None)."""
    pairs = list(SummarySlice.objects.order_by().values_list("repo", "benchmark").distinct())
    return (sorted({r for r, _ in pairs}),
            sorted({b for r, b in pairs if repo is None or r == repo}))


def slice_choices(column: str, **filters) -> list[str]:
    """Distinct values of a slice column (repo, branch or a RunSummary group column) among
    every run's slices matching `filters`: from `SummarySlice`, which holds each slice once
    however long the history."""
    values = (SummarySlice.objects.filter(**filters)
              .order_by().values_list(column, flat=True).distinct())
    return sorted(values)


def summary_choices(column: str, **filters) -> list[str]:
    """Distinct values of a RunSummary column among the summaries matching `filters` (a
    commit's: `run__head_sha`; every run's are `slice_choices`)."""
    values = (RunSummary.objects.filter(**filters)
              .order_by().values_list(column, flat=True).distinct())
    return sorted(value for value in values if value is not None)
