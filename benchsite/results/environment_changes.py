"""Environment changes as events: on a repo's default branch, per job and device, where
the fingerprints (`results.environment`) of consecutive runs differ.

Kept at ingestion (`record_changes`, before detection, so a regression raised by the same
upload can be told it coincides with one) and correct whatever order runs arrive in: a run
that lands between two others replaces the change between them by its own two.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

from django.db.models import Q

from benchsite.results.environment import MACHINE_FIELDS, Change, describe, diff
from benchsite.results.models import EnvironmentChange, Run

# Read from the machine while it runs (nvidia-smi, sysfs): a read that failed once is not a
# change, so these count only when both runs have them.
MACHINE_KEYS = frozenset(MACHINE_FIELDS.values())


def changes_between(before: dict[str, str], after: dict[str, str]) -> list[Change]:
    """What changed between two runs' fingerprints, a machine state missing on one side
    left out."""
    return [change for change in diff(before, after)
            if change.key not in MACHINE_KEYS
            or (change.before is not None and change.after is not None)]


def record_changes(runs: Iterable[Run],
                   default_branches: Callable[[str], list[str]]) -> list[EnvironmentChange]:
    """Record the environment changes these runs make on their repo's default branches
    (with the run before each, and the run after it when it arrived late); returns the
    changes made."""
    made: list[EnvironmentChange] = []
    for run in runs:
        if not run.environment_hash or run.head_branch not in default_branches(run.repo):
            continue
        stream = (Run.objects.filter(repo=run.repo, head_branch=run.head_branch,
                                     device=run.device, arch=run.arch, name=run.name)
                  .exclude(environment_hash="").exclude(pk=run.pk)
                  .only("pk", "timestamp", "environment", "environment_hash"))
        earlier = Q(timestamp__lt=run.timestamp) | Q(timestamp=run.timestamp, pk__lt=run.pk)
        before = stream.filter(earlier).order_by("-timestamp", "-pk").first()
        after = stream.exclude(earlier).order_by("timestamp", "pk").first()
        for old, new in ((before, run), (run, after)):
            if new is not None:
                change = _link(old, new, run)
                if change is not None:
                    made.append(change)
    return made


def _link(before: Run | None, after: Run, run: Run) -> EnvironmentChange | None:
    """The change into `after` from `before` (the run before it; `run`: either, for the
    stream), replacing one recorded from another run; None when nothing changed or it is
    recorded already."""
    existing = EnvironmentChange.objects.filter(after_run=after).first()
    change = None if before is None else _change(run, before, after)
    if existing is not None:
        if change is not None and existing.before_run_id == before.pk:
            return None
        existing.delete()
    if change is not None:
        change.save()
    return change


def _change(stream: Run, before: Run, after: Run) -> EnvironmentChange | None:
    """The change between two consecutive runs of `stream`'s job, device and branch (not
    saved); None when their environments are the same."""
    if before.environment_hash == after.environment_hash:
        return None
    changes = changes_between(before.environment, after.environment)
    if not changes:
        return None
    return EnvironmentChange(
        repo=stream.repo, branch=stream.head_branch, device=stream.device, arch=stream.arch,
        name=stream.name, before_run=before, after_run=after, at=after.timestamp,
        changes=[change.as_json() for change in changes],
        summary=describe(changes, before.environment, after.environment)[:1000])


def in_range(repo: str, branch: str, start: datetime | None, end: datetime,
             device: str | None = None, arch: str | None = None):
    """The changes of a repo's branch at times in (start, end] (on one device and arch when
    given), oldest first: what a chart of that range marks."""
    found = EnvironmentChange.objects.filter(repo=repo, branch=branch, at__lte=end)
    if start is not None:
        found = found.filter(at__gt=start)
    if device is not None:
        found = found.filter(device=device)
    if arch is not None:
        found = found.filter(arch=arch)
    return found.order_by("at", "pk")


def rebuild(repo: str, branches: Iterable[str]) -> int:
    """Make a repo's recorded environment changes on these branches what its stored runs
    say (after a migration, or runs deleted), keeping the rows that are right (regressions
    point at them); returns how many there are. One pass over the runs, in bulk."""
    branches = list(branches)
    wanted = {change.after_run_id: change for change in _from_runs(repo, branches)}
    kept, stale = set(), []
    for pk, after, before in EnvironmentChange.objects.filter(
            repo=repo, branch__in=branches).values_list("pk", "after_run_id", "before_run_id"):
        if after in wanted and wanted[after].before_run_id == before:
            kept.add(after)
        else:
            stale.append(pk)
    EnvironmentChange.objects.filter(pk__in=stale).delete()
    EnvironmentChange.objects.bulk_create(
        [change for after, change in wanted.items() if after not in kept], batch_size=1000)
    return len(wanted)


def _from_runs(repo: str, branches: list[str]) -> Iterator[EnvironmentChange]:
    """The changes between consecutive runs of each job and device (unsaved)."""
    runs = (Run.objects.filter(repo=repo, head_branch__in=branches)
            .exclude(environment_hash="")
            .order_by("head_branch", "device", "arch", "name", "timestamp", "pk")
            .only("pk", "repo", "head_branch", "device", "arch", "name", "timestamp",
                  "environment", "environment_hash"))
    before = None
    for run in runs.iterator(chunk_size=2000):
        stream = (run.head_branch, run.device, run.arch, run.name)
        if before is not None and before[0] == stream:
            change = _change(run, before[1], run)
            if change is not None:
                yield change
        before = (stream, run)
