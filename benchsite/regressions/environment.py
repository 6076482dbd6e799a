"""Regressions whose change coincides with a change of the runs' environment
(`results.environment_changes`): on the series' device, within the regression's commit
range (last good, first bad], which for a change point is its likelihood interval."""

from __future__ import annotations

from collections import defaultdict

from benchsite.regressions.models import Regression
from benchsite.results.models import EnvironmentChange


def coincide(records: list[Regression]) -> None:
    """Set each record's `environment_change` (unsaved records too; their `series` is
    loaded): the change of its first bad run when there is one, else the latest in its
    range. One query per repo and branch."""
    by_branch: defaultdict[tuple[str, str], list[Regression]] = defaultdict(list)
    for record in records:
        if record.last_good_at is not None:
            by_branch[record.series.repo, record.branch].append(record)
    for (repo, branch), mine in by_branch.items():
        changes = list(EnvironmentChange.objects.filter(
            repo=repo, branch=branch, at__gt=min(r.last_good_at for r in mine),
            at__lte=max(r.first_bad_at for r in mine)).order_by("-at", "-pk"))
        for record in mine:
            series = record.series
            inside = [change for change in changes
                      if change.device == series.device and change.arch == series.arch
                      and record.last_good_at < change.at <= record.first_bad_at]
            exact = [c for c in inside if c.after_run_id == record.first_bad_run_id]
            chosen = (exact or inside or [None])[0]
            record.environment_change = chosen


def relabel(repo: str, branches: list[str]) -> int:
    """Label again the stored regressions of a repo's branches (after `rebuild`: changes
    recorded since they were raised, or gone); returns how many changed."""
    records = list(Regression.objects.filter(series__repo=repo, branch__in=branches,
                                             last_good_at__isnull=False)
                   .select_related("series"))
    before = {record.pk: record.environment_change_id for record in records}
    coincide(records)
    changed = [record for record in records
               if record.environment_change_id != before[record.pk]]
    Regression.objects.bulk_update(changed, ["environment_change"], batch_size=1000)
    return len(changed)
