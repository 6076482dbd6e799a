"""Running the detectors on a branch's history and recording what they find: one record per
change, grouped with the other series' records of the same commit range.

Detection runs on each repo's default branches only (`DetectionSettings.branches_for`),
one branch's history at a time: results of other branches (pull requests) are never points
of it, so they cannot raise anything there.

One change, one record: the change-point detector raises; the HUD policy's finding of the
same change in the same series is evidence on that record (and the HUD's verdict on the
series is kept with it), not a second record. The HUD policy raises on its own only for
the metrics whose threshold says so (`MetricThreshold.hud_raises`). A pass-like accuracy
that becomes a failure is raised by `accuracy_changes`, and a metric a run stops reporting
while the run still reports its benchmark by `missing_metrics` (both on upload).

A record's commit range is its change's: from the last point surely at the old level to the
first surely at the new one (for a change point, the likelihood interval of its place; one
commit where the step is clear). A detection is matched with the current records of its
series whose first bad point lies within a few points of that range: a change seen again
(on the next upload, or placed a point or two differently with more data) updates its
record while that is current, and is never raised again once triaged as fixed, expected or
a false positive. A change elsewhere is a new record.

Groups: new records of one repo and branch are first aligned: a record whose range holds a
commit, or is within a few points of one, where more records of this detection (or an
existing group) put their first bad point moves there, since many series agreeing locate a
change better than one (unless its own points plainly rule that commit out). Records whose
commit ranges then overlap an existing group's join it (narrowing its range to the
intersection); the others form new groups among themselves.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import datetime

import numpy as np
from django.db import IntegrityError, transaction
from django.db.models import Count
from django.utils import timezone
from scipy import stats

from benchsite.comparison import outcomes, stored_baselines
from benchsite.comparison.directions import HIGHER, better_for
from benchsite.comparison.history import History, recent_in_parts
from benchsite.comparison.outcomes import passes
from benchsite.regressions.changes import recorded_changes
from benchsite.regressions.detect import Detection, changepoint, hud_policy
from benchsite.regressions.environment import coincide, relabel
from benchsite.regressions.models import (
    AlertGroup,
    DetectionSettings,
    Detector,
    Regression,
    RegressionEvent,
)
from benchsite.results import environment_changes
from benchsite.results.environment_changes import record_changes
from benchsite.results.models import Result, Run, Series
from runner.contract.status import STATUS_METRIC

# How many points apart two detections of one change may be placed.
CHANGEPOINT_TOLERANCE = 3
MOVE_SHARE = 0.25  # see `_supports`
# A commit holds a change many series share when more of its repo's records put their first
# bad point there than chance would at this level, given the repo's records per commit.
COINCIDENCE = 0.01
UPDATED_FIELDS = ["kind", "baseline", "value", "magnitude", "confidence", "evidence",
                  "updated_at"]
NUMERIC = (Detector.CHANGEPOINT, Detector.HUD_POLICY)
ACCURACY_POINTS = 60  # string results of a series looked at for a pass -> failure


def detect_series(series_ids: Iterable[int], branch: str,
                  settings: DetectionSettings | None = None,
                  new_since: datetime | None = None, part: int = 1000) -> list[Regression]:
    """Detect changes in the recent history of these series on `branch` and record them;
    returns the records it created (with `series` loaded). `new_since`: the oldest point
    this detection is for (an upload's), when earlier points were detected on already.
    The series go `part` at a time, each part's histories read while the previous part is
    detected (`recent_in_parts`)."""
    settings = settings or DetectionSettings.load()
    ids = sorted(set(series_ids))
    parts = [ids[start : start + part] for start in range(0, len(ids), part)]
    created: list[Regression] = []
    for histories in recent_in_parts(parts, settings.history_points, [branch]):
        created += _detect(histories, branch, settings, new_since)
    return created


@dataclasses.dataclass(frozen=True, slots=True)
class _Named:
    """What detection reads of a series: loaded as models (their JSON columns decoded),
    a night's 25,000 series took 6.4 s under the profiler, more than the HUD policy."""

    pk: int
    repo: str
    benchmark: str
    metric: str


def _with_series(records: list[Regression]) -> list[Regression]:
    """The records with their series loaded (grouping, notifications and callers read it)."""
    series = Series.objects.in_bulk({record.series_id for record in records})
    for record in records:
        record.series = series[record.series_id]
    return records


def _detect(histories: dict[int, History], branch: str, settings: DetectionSettings,
            new_since: datetime | None) -> list[Regression]:
    if not histories:
        return []
    series = {row[0]: _Named(*row) for row in Series.objects.filter(pk__in=list(histories))
              .values_list("pk", "repo", "benchmark", "metric")}
    directions = better_for(series.values(),
                            {pk: history.unit for pk, history in histories.items()})
    existing = _existing(histories, branch)
    changes = _changepoints(histories, series, settings)
    hud = _hud_scans(histories, series, directions, settings)
    new: list[tuple[Regression, History]] = []
    updated: list[Regression] = []
    for pk, history in histories.items():
        found_here = changes[pk]
        if len(history) >= settings.history_points:
            found_here = [found for found in found_here
                          if not _seen_whole(found, history, settings, new_since)]
        for detector, found, evidence, tolerance in _merged(
                series[pk], history, directions[pk], found_here, hud[pk], settings):
            low = history.timestamps[max(0, found.last_good + 1 - tolerance)]
            high = history.timestamps[min(len(history) - 1, found.index + tolerance)]
            match = next((record for record in existing[pk]
                          if low <= record.first_bad_at <= high), None)
            kind = _kind(detector, found, directions[pk])
            if match is None:
                record = _record(series[pk], branch, history, detector, found, kind,
                                 directions[pk], evidence)
                new.append((record, history))
                existing[pk].append(record)
            elif match.pk and match.is_current and _refresh(match, found, kind, evidence):
                updated.append(match)  # (a match made in this run is the same new record)
    if updated:
        Regression.objects.bulk_update(updated, UPDATED_FIELDS)
    created = _save(_with_series(_aligned(new, series, branch)), branch)
    # (after: a change found now is kept, and starts its series' level)
    stored_baselines.store_newest(histories, recorded_changes(histories, [branch]),
                                  settings.lookback_points)
    return created


def _seen_whole(found: Detection, history: History, settings: DetectionSettings,
                new_since: datetime | None) -> bool:
    """In a history cut to its window, whether a change was for detection on the whole
    history instead: one within the first baseline's reach has too little of its old level
    left to place, and one raised before `new_since` was already judged by the detection of
    its own upload, which saw more of its old level (a window cut short of it may place it
    differently and raise it again)."""
    return found.index < settings.before or (
        new_since is not None and history.timestamps[found.detected_at] < new_since)


def _changepoints(histories: dict[int, History], series: dict[int, _Named],
                  settings: DetectionSettings) -> dict[int, list[Detection]]:
    """Change points of every series, with each metric's smallest magnitude (instruction
    counts matter at 1 %, most timings only at the global minimum)."""
    if not settings.changepoint_enabled:
        return {pk: [] for pk in histories}
    params = settings.changepoint_params()
    by_magnitude: defaultdict[float, list[int]] = defaultdict(list)
    for pk in histories:
        one = series[pk]
        by_magnitude[settings.changepoint_magnitude(one.metric, one.benchmark)].append(pk)
    changes: dict[int, list[Detection]] = {}
    for magnitude, pks in by_magnitude.items():
        found = changepoint.detect_many([histories[pk].values for pk in pks],
                                        dataclasses.replace(params, min_magnitude=magnitude),
                                        [histories[pk].noise_floor for pk in pks])
        changes.update(zip(pks, found, strict=True))
    return changes


def _hud_scans(histories: dict[int, History], series: dict[int, _Named],
               directions: dict[int, str | None], settings: DetectionSettings,
               ) -> dict[int, tuple[hud_policy.Params | None, list[Detection]]]:
    """The HUD policy's parameters and findings per series (none where it is off or the
    series' direction is unknown), all series scanned together."""
    scanned = {pk: (None, []) for pk in histories}
    if not settings.hud_enabled:
        return scanned
    pks = [pk for pk in histories if directions[pk] is not None]
    params = [settings.hud_params(series[pk].metric, series[pk].benchmark) for pk in pks]
    found = hud_policy.scan_many([histories[pk].values for pk in pks],
                                [directions[pk] for pk in pks], params)
    scanned.update(zip(pks, zip(params, found, strict=True), strict=True))
    return scanned


def _merged(series: _Named, history: History, direction: str | None,
            changes: list[Detection],
            hud_scan: tuple[hud_policy.Params | None, list[Detection]],
            settings: DetectionSettings):
    """(raising detector, detection, evidence, matching tolerance in points) per change:
    change points carry the HUD policy's finding of the same change (`hud_scan`: its
    parameters and findings) and its verdict on the series; the HUD policy's other findings
    are raised only where its threshold says so."""
    params, hud = hud_scan
    window = params.baseline + params.comparison if params else 0
    used: set[int] = set()
    for found in changes:
        evidence = {}
        if params is not None:
            worse = _kind(Detector.CHANGEPOINT, found, direction) == Regression.Kind.REGRESSION
            same = next((number for number, other in enumerate(hud)
                         if worse and number not in used
                         and abs(other.index - found.index) <= window), None)
            verdict = hud_policy.status(history.values[: found.detected_at + 1], direction,
                                        params)
            evidence["hud_policy"] = {"status": verdict}
            if same is not None:
                used.add(same)
                evidence["hud_policy"].update(_hud_evidence(hud[same], history))
        yield Detector.CHANGEPOINT, found, evidence, CHANGEPOINT_TOLERANCE
    threshold = settings.threshold_for(series.metric, series.benchmark)
    if params is not None and threshold is not None and threshold.hud_raises:
        for number, found in enumerate(hud):
            if number not in used:
                # An episode's start moves with the windows until the baseline takes it in.
                yield Detector.HUD_POLICY, found, {}, window


def _hud_evidence(found: Detection, history: History) -> dict:
    return {"kind": found.kind, "magnitude": found.magnitude,
            "violations": int(found.confidence),
            "first_bad_at": history.timestamps[found.index].isoformat()}


def _kind(detector: str, found: Detection, direction: str | None) -> str:
    if detector == Detector.HUD_POLICY:
        return found.kind
    if direction is None:
        return Regression.Kind.CHANGE
    worse = found.magnitude < 0 if direction == HIGHER else found.magnitude > 0
    return Regression.Kind.REGRESSION if worse else Regression.Kind.IMPROVEMENT


def _existing(histories: dict[int, History], branch: str) -> defaultdict[int, list[Regression]]:
    oldest = min(history.timestamps[0] for history in histories.values())
    found: defaultdict[int, list[Regression]] = defaultdict(list)
    records = Regression.objects.filter(series_id__in=list(histories), branch=branch,
                                        detector__in=NUMERIC, first_bad_at__gte=oldest)
    for record in records.only("id", "series_id", "detector", "first_bad_at", "state", *
                               UPDATED_FIELDS):
        found[record.series_id].append(record)
    return found


def _record(series: _Named, branch: str, history: History, detector: str, found: Detection,
            kind: str, direction: str | None, evidence: dict) -> Regression:
    """A new record (its commits are filled in by `_save`, its series by `_with_series`)."""
    record = Regression(
        series_id=series.pk, branch=branch, detector=detector, kind=kind,
        direction=direction or "", baseline=found.before, value=found.after,
        magnitude=found.magnitude, confidence=found.confidence, points_after=found.delay,
        detected_at=history.timestamps[found.detected_at], evidence=evidence)
    _place(record, history, found.index, found.last_good)
    return record


def _place(record: Regression, history: History, index: int, good: int | None = None) -> None:
    """Put the record's change after point `good` (default: the one before) and at or
    before point `index`, its first bad point."""
    good = index - 1 if good is None else good
    good = good if good >= 0 else None
    record.first_bad_run_id = history.run_ids[index]
    record.first_bad_at = history.timestamps[index]
    record.last_good_run_id = history.run_ids[good] if good is not None else None
    record.last_good_at = history.timestamps[good] if good is not None else None


def _aligned(new: list[tuple[Regression, History]], series: dict[int, _Named],
             branch: str) -> list[Regression]:
    """The new records, each moved to the commit near its range (within the matching
    tolerance) where most new records and existing groups' members put their first bad
    point, where its own points allow it (`_supports`) and that commit holds a shared change
    (`_agreeing`) with twice as many records as its own; its range is then that commit."""
    if not new:
        return []
    runs = {pk for _, history in new for pk in history.run_ids}
    shas = dict(Run.objects.filter(pk__in=runs).values_list("pk", "head_sha"))
    votes: Counter[tuple[str, str]] = Counter()
    for record, _ in new:
        votes[series[record.series_id].repo, shas.get(record.first_bad_run_id, "")] += 1
    repos = {series[record.series_id].repo for record, _ in new}
    oldest = min(history.timestamps[0] for _, history in new)
    for repo, sha, members in (AlertGroup.objects
                               .filter(repo__in=repos, branch=branch, first_bad_at__gte=oldest)
                               .annotate(count=Count("members"))
                               .values_list("repo", "first_bad_sha", "count")):
        votes[repo, sha] += members or 1  # (one query, not one a group)
    agreeing = _agreeing(new, series, branch, oldest)
    for record, history in new:
        repo = series[record.series_id].repo
        index = history.run_ids.index(record.first_bad_run_id)
        good = (history.run_ids.index(record.last_good_run_id)
                if record.last_good_run_id is not None else -1)
        near = range(max(1, good + 1 - CHANGEPOINT_TOLERANCE),
                     min(len(history), index + CHANGEPOINT_TOLERANCE + 1))
        near = [i for i in near if good < i <= index or _supports(history, record, index, i)]
        best = max(near, key=lambda i: (votes[repo, shas.get(history.run_ids[i], "")],
                                        -abs(i - index)))
        there, own = (votes[repo, shas.get(history.run_ids[i], "")] for i in (best, index))
        if there >= max(agreeing[repo], 2 * own):
            _place(record, history, best)
    return [record for record, _ in new]


def _agreeing(new: list[tuple[Regression, History]], series: dict[int, _Named], branch: str,
              oldest: datetime) -> dict[str, int]:
    """Per repo, how many records at one commit are more than a coincidence: the fewest (2
    or more) that its records per commit over the histories' window (Poisson) exceed with a
    chance of at most `COINCIDENCE`. A repo of many series changing independently (a busy
    nightly) needs more than one whose series change together."""
    records: Counter[str] = Counter(series[record.series_id].repo for record, _ in new)
    commits: Counter[str] = Counter()
    for record, history in new:
        repo = series[record.series_id].repo
        commits[repo] = max(commits[repo], len(history))
    for repo, count in (Regression.objects.filter(series__repo__in=list(records),
                                                  branch=branch, first_bad_at__gte=oldest)
                        .order_by().values_list("series__repo")
                        .annotate(count=Count("id"))):
        records[repo] += count
    # isf: the largest count whose excess has a chance of at most COINCIDENCE.
    return {repo: max(2, int(stats.poisson.isf(COINCIDENCE, count / commits[repo])) + 1)
            for repo, count in records.items()}


def _supports(history: History, record: Regression, index: int, other: int) -> bool:
    """Whether the series' own points allow its change at `other` instead of `index`: the
    mean of the points moved to the other side is not clearly at their old side's level
    (at least a quarter of the way from it to the level they join; noise can place a
    change a point off, but points plainly at the old level are never moved)."""
    before, after = math.log(record.baseline), math.log(record.value)
    low, high = sorted((index, other))
    if low == high:
        return True
    moved = np.log(history.values[low:high])
    if not np.all(np.isfinite(moved)) or before == after:
        return False
    joined, left = (after, before) if other < index else (before, after)
    return bool((np.mean(moved) - left) / (joined - left) >= MOVE_SHARE)


def _save(records: list[Regression], branch: str) -> list[Regression]:
    """Insert new records with their first events and groups; one by one (skipping those a
    concurrent run inserted first) if inserting them together fails."""
    if not records:
        return []
    runs = {pk for r in records for pk in (r.first_bad_run_id, r.last_good_run_id) if pk}
    shas = dict(Run.objects.filter(pk__in=runs).values_list("pk", "head_sha"))
    for record in records:
        record.first_bad_sha = shas.get(record.first_bad_run_id, "")
        record.last_good_sha = shas.get(record.last_good_run_id, "")
    coincide(records)
    try:
        with transaction.atomic():
            _group(records, branch)
            Regression.objects.bulk_create(records)
            RegressionEvent.objects.bulk_create(_first_event(r) for r in records)
        return records
    except IntegrityError:
        saved = []
        for record in records:
            record.pk, record._state.adding = None, True
            try:
                with transaction.atomic():
                    _group([record], branch)
                    record.save()
                    _first_event(record).save()
            except IntegrityError:  # a concurrent run recorded the same change first
                continue
            saved.append(record)
        return saved


def _group(records: list[Regression], branch: str) -> None:
    """Put each record in the group of its repo and branch whose range overlaps its own
    (an existing one, or one made for records of this detection), narrowing the group's
    range to the intersection."""
    by_repo: defaultdict[str, list[Regression]] = defaultdict(list)
    for record in records:
        by_repo[record.series.repo].append(record)
    for repo, mine in by_repo.items():
        mine.sort(key=lambda r: r.first_bad_at)
        oldest = min(r.last_good_at or r.first_bad_at for r in mine)
        groups = list(AlertGroup.objects.select_for_update().filter(
            repo=repo, branch=branch, first_bad_at__gt=oldest))
        changed: set[int] = set()
        for record in mine:
            group = next((g for g in groups
                          if g.overlaps(record.last_good_at, record.first_bad_at)), None)
            if group is None:
                group = AlertGroup.objects.create(
                    repo=repo, branch=branch, first_bad_sha=record.first_bad_sha,
                    first_bad_at=record.first_bad_at, last_good_sha=record.last_good_sha,
                    last_good_at=record.last_good_at)
                groups.append(group)
            elif group.first_bad_at != record.first_bad_at or (
                    group.last_good_at != record.last_good_at):
                group.narrow(record)
                changed.add(group.pk)
            record.group = group
        for group in groups:
            if group.pk in changed:
                group.save(update_fields=["first_bad_sha", "first_bad_at", "last_good_sha",
                                          "last_good_at"])


def _first_event(record: Regression) -> RegressionEvent:
    return RegressionEvent(regression=record, to_state=record.state,
                           note=f"raised by the {record.get_detector_display()}")


def _refresh(record: Regression, found: Detection, kind: str, evidence: dict) -> bool:
    """Bring a current record up to date with a detection of the same change; True if it
    changed."""
    fresh = {"kind": kind, "baseline": found.before, "value": found.after,
             "magnitude": found.magnitude, "confidence": found.confidence,
             "evidence": evidence}
    if all(getattr(record, name) == value for name, value in fresh.items()):
        return False
    for name, value in fresh.items():
        setattr(record, name, value)
    record.updated_at = timezone.now()  # bulk_update does not apply auto_now
    return True


def accuracy_changes(series_ids: Iterable[int], branch: str,
                     runs: list[Run] | None = None) -> list[Regression]:
    """Raise each series whose string result went from a pass (as the HUD counts passes)
    to a failure on `branch`, once per such change; returns the new records. With `runs`
    (detection after an upload: the runs just stored), only the series with a failing
    result in them can have a new change, and only theirs are read back: reading every
    accuracy series' last ACCURACY_POINTS results took seconds a night (4,656 series)."""
    ids = list(series_ids)
    if runs is not None:
        failing = {pk for pk, values in Result.objects.of_runs(runs)
                   .filter(string_values__isnull=False)
                   .values_list("series_id", "string_values") if passes(values) is False}
        ids = [pk for pk in ids if pk in failing]
    if not ids:
        return []
    rows = (Result.objects.filter(series_id__in=ids, run__head_branch=branch,
                                  string_values__isnull=False)
            .exclude(series__metric=STATUS_METRIC)
            .order_by("series_id", "-timestamp", "-id")
            .values_list("series_id", "timestamp", "run_id", "string_values"))
    latest: defaultdict[int, list[tuple]] = defaultdict(list)
    for row in rows:
        if len(latest[row[0]]) < ACCURACY_POINTS:
            latest[row[0]].append(row)
    found = []
    for pk, points in latest.items():
        points.reverse()
        judged = [(at, run, passes(values)) for _, at, run, values in points
                  if passes(values) is not None]
        for (good_at, good_run, was), (bad_at, bad_run, now) in zip(judged, judged[1:],
                                                                    strict=False):
            if was and not now:
                found.append(Regression(
                    series_id=pk, branch=branch, detector=Detector.ACCURACY,
                    kind=Regression.Kind.REGRESSION, direction=outcomes.DIRECTION,
                    baseline=1.0, value=0.0, magnitude=-1.0, points_after=1, detected_at=bad_at,
                    first_bad_run_id=bad_run, first_bad_at=bad_at,
                    last_good_run_id=good_run, last_good_at=good_at))
    return _new_only(found, branch)


def missing_metrics(run: Run) -> list[Regression]:
    """Raise each series the previous run of the same job (repo, branch, name, device,
    arch) reported and `run` does not, where `run` still reports its benchmark."""
    previous = (Run.objects.filter(repo=run.repo, head_branch=run.head_branch, name=run.name,
                                   device=run.device, arch=run.arch,
                                   timestamp__lt=run.timestamp)
                .order_by("-timestamp", "-id").first())
    if previous is None:
        return []
    now = dict(Result.objects.of_run(run).values_list("series_id", "series__benchmark"))
    before = dict(Result.objects.of_run(previous)
                  .values_list("series_id", "series__benchmark"))
    benchmarks = set(now.values())
    gone = [pk for pk, benchmark in before.items() if pk not in now and benchmark in benchmarks]
    return _new_only([Regression(
        series_id=pk, branch=run.head_branch, detector=Detector.MISSING,
        kind=Regression.Kind.REGRESSION, baseline=1.0, value=0.0, magnitude=-1.0,
        points_after=1, detected_at=run.timestamp, first_bad_run_id=run.pk,
        first_bad_at=run.timestamp, last_good_run_id=previous.pk,
        last_good_at=previous.timestamp) for pk in gone], run.head_branch)


def _new_only(records: list[Regression], branch: str) -> list[Regression]:
    """Those not recorded yet (one record per change), saved and grouped."""
    if not records:
        return []
    keys = {(r.series_id, r.first_bad_at) for r in records}
    known = set(Regression.objects.filter(
        series_id__in={r.series_id for r in records}, detector=records[0].detector,
        first_bad_at__in={r.first_bad_at for r in records})
        .values_list("series_id", "first_bad_at"))
    fresh = [r for r in records if (r.series_id, r.first_bad_at) in keys - known]
    return _save(_with_series(fresh), branch)


def detect_runs(runs: Iterable[Run], settings: DetectionSettings | None = None,
                chunk: int = 2000) -> list[Regression]:
    """Detection after an upload: for each of its runs on a default branch of its repo,
    the series it touched, their accuracy, and the metrics it stopped reporting."""
    settings = settings or DetectionSettings.load()
    runs = list(runs)
    record_changes(runs, settings.branches_for)  # first: a regression may coincide with one
    created: list[Regression] = []
    by_branch: defaultdict[tuple[str, str], set[int]] = defaultdict(set)
    branch_runs: defaultdict[tuple[str, str], list[Run]] = defaultdict(list)
    oldest: dict[tuple[str, str], datetime] = {}
    for run in runs:
        if run.head_branch not in settings.branches_for(run.repo):
            continue  # a pull request's or another branch's run: compared, never detected
        key = run.repo, run.head_branch
        by_branch[key].update(Result.objects.of_run(run).values_list("series_id", flat=True))
        branch_runs[key].append(run)
        oldest[key] = min(oldest.get(key, run.timestamp), run.timestamp)
        created += missing_metrics(run)
    for key, series_ids in by_branch.items():
        ids, branch = sorted(series_ids), key[1]
        created += detect_series(ids, branch, settings, new_since=oldest[key], part=chunk)
        created += accuracy_changes(ids, branch, branch_runs[key])
    return created


def detect_repo(repo: str, settings: DetectionSettings | None = None,
                chunk: int = 1000) -> list[Regression]:
    """Detection over the recent history of every series of a repo, on each default
    branch (for results stored before detection was set up, or after changing settings)."""
    settings = settings or DetectionSettings.load()
    ids = list(Series.objects.filter(repo=repo).order_by("pk").values_list("pk", flat=True))
    created: list[Regression] = []
    environment_changes.rebuild(repo, settings.branches_for(repo))
    relabel(repo, settings.branches_for(repo))
    for branch in settings.branches_for(repo):
        created += detect_series(ids, branch, settings, part=chunk)
        created += accuracy_changes(ids, branch)
    return created

