"""What differs between the environments (`results.environment`) of two commits' runs, per
device: "is it the code, or did torch, the driver or the image move with it?".

The runs of each commit are paired by job name where both commits have it (two jobs on one
machine may install different packages: like is compared with like), else the newest run
of each side. A device whose pairs all match is said once (job ""); one whose pairs differ
gets an entry per differing job; a device that ran at one commit only, one entry. A pair
where a side has no fingerprint is "unknown", not "same": nothing known is nothing checked.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import NamedTuple

from benchsite.results.environment import Change, describe
from benchsite.results.environment_changes import changes_between
from benchsite.results.models import Run

SAME, CHANGED, UNKNOWN = "same", "changed", "unknown"
BASE_ONLY, HEAD_ONLY = "base_only", "head_only"  # a device that ran at one commit only
STATES = (SAME, CHANGED, UNKNOWN, BASE_ONLY, HEAD_ONLY)
# What a check of "the same environment" cannot pass (a device that ran at one commit only
# has no series compared: its environment moves no number).
DIFFERS = (CHANGED, UNKNOWN)


@dataclass(frozen=True)
class EnvironmentDiff:
    """One device's (and job's) environments at the base and the head, and what differs."""

    device: str
    arch: str
    job: str  # the runs' job name; "": every job (the same, or ran at one commit only)
    base_hash: str  # environment_hash; "": not known (or no run at that commit)
    head_hash: str
    same: bool
    state: str  # one of STATES
    changes: list[Change]  # key, before, after (orjson writes them as objects)
    summary: str  # "torch 2.5.0 -> 2.6.0; cuda, driver unchanged"


class _Run(NamedTuple):
    sha: str
    device: str
    arch: str
    name: str
    environment: dict[str, str]
    environment_hash: str


def between(repo: str, base_sha: str, head_sha: str, device: str = "",
            arch: str = "") -> list[EnvironmentDiff]:
    """Per device and arch (only `device`, `arch` where given), the environments of the
    runs of commits `base_sha` and `head_sha` of `repo` and what differs. One query."""
    runs = Run.objects.filter(repo=repo, head_sha__in=[base_sha, head_sha])
    if device:
        runs = runs.filter(device=device)
    if arch:
        runs = runs.filter(arch=arch)
    found = [_Run._make(row) for row in runs.order_by("timestamp", "pk").values_list(
        "head_sha", "device", "arch", "name", "environment", "environment_hash")]
    base, head = _by_device(found, base_sha), _by_device(found, head_sha)
    diffs = []
    for key in sorted(set(base) | set(head)):
        diffs += _device(*key, base.get(key, {}), head.get(key, {}))
    return diffs


def _by_device(runs: list[_Run], sha: str) -> dict[tuple[str, str], dict[str, _Run]]:
    """A commit's runs by (device, arch) and job name, the newest job last: of each job's
    runs (oldest first) the newest with a fingerprint, else its newest."""
    found: defaultdict[tuple[str, str], dict[str, _Run]] = defaultdict(dict)
    for run in runs:
        if run.sha != sha:
            continue
        jobs = found[run.device, run.arch]
        kept = jobs.get(run.name)
        if kept is None or run.environment_hash or not kept.environment_hash:
            jobs.pop(run.name, None)
            jobs[run.name] = run
    return found


def _device(device: str, arch: str, base: dict[str, _Run],
            head: dict[str, _Run]) -> list[EnvironmentDiff]:
    """A device's entries: one where it ran at one commit only or every pair is the same,
    else one per pair that differs."""
    if not base or not head:
        run = next(reversed((base or head).values()))
        state, missing = (HEAD_ONLY, "base") if head else (BASE_ONLY, "head")
        return [EnvironmentDiff(device, arch, "", run.environment_hash if base else "",
                                run.environment_hash if head else "", False, state, [],
                                f"no runs at the {missing}")]
    common = sorted(set(base) & set(head))
    if common:
        pairs = [_pair(device, arch, name, base[name], head[name]) for name in common]
    else:  # renamed jobs: the newest of each
        older, newer = next(reversed(base.values())), next(reversed(head.values()))
        pairs = [_pair(device, arch, f"{older.name} -> {newer.name}", older, newer)]
    differ = [pair for pair in pairs if not pair.same]
    return differ or [replace(pairs[0], job="")]


def _pair(device: str, arch: str, job: str, base: _Run, head: _Run) -> EnvironmentDiff:
    """The environments of one job's runs at the base and the head."""
    known = (base.environment_hash, head.environment_hash)
    if not all(known):
        where = ("both commits" if not any(known) else
                 "the base" if not base.environment_hash else "the head")
        return EnvironmentDiff(device, arch, job, *known, False, UNKNOWN, [],
                               f"environment unknown at {where}")
    changes = [] if known[0] == known[1] else changes_between(base.environment,
                                                              head.environment)
    if not changes:
        return EnvironmentDiff(device, arch, job, *known, True, SAME, [], "same environment")
    return EnvironmentDiff(device, arch, job, *known, False, CHANGED, changes,
                           describe(changes, base.environment, head.environment))
