"""Running the detectors on stored series and recording what they find.

A detection is matched with the records of the same series and detector whose first bad
point lies within a few points of it: a change seen again (on the next upload, or placed a
point or two differently with more data) updates its record while that is current, and is
never raised again once triaged as fixed, expected or a false positive. A change elsewhere
is a new record.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable

from django.db import IntegrityError, transaction
from django.utils import timezone

from benchsite.regressions.detect import Detection, changepoint, hud_policy
from benchsite.regressions.history import History, recent
from benchsite.regressions.models import (
    DetectionSettings,
    Detector,
    MetricDirection,
    Regression,
    RegressionEvent,
)
from benchsite.results.models import Run, Series
from runner.contract.directions import HIGHER

# How many points apart two detections of one change may be placed.
CHANGEPOINT_TOLERANCE = 3
UPDATED_FIELDS = ["kind", "baseline", "value", "magnitude", "confidence", "updated_at"]


def detect_series(series_ids: Iterable[int],
                  settings: DetectionSettings | None = None) -> list[Regression]:
    """Detect changes in the recent history of these series and record them; returns the
    records it created (with `series` loaded)."""
    settings = settings or DetectionSettings.load()
    histories = recent(set(series_ids), settings.history_points)
    if not histories:
        return []
    series = Series.objects.in_bulk(list(histories))
    directions = MetricDirection.resolve(list(series.values()),
                                         {pk: history.unit for pk, history in histories.items()})
    existing = _existing(histories)
    changes = _changepoints(histories, series, settings)
    new: list[Regression] = []
    updated: list[Regression] = []
    for pk, history in histories.items():
        for detector, found, tolerance in _detections(series[pk], history, directions[pk],
                                                      changes[pk], settings):
            low = history.timestamps[max(0, found.index - tolerance)]
            high = history.timestamps[min(len(history) - 1, found.index + tolerance)]
            match = next((record for record in existing[pk, detector]
                          if low <= record.first_bad_at <= high), None)
            kind = _kind(detector, found, directions[pk])
            if match is None:
                record = _record(series[pk], history, detector, found, kind, directions[pk])
                new.append(record)
                existing[pk, detector].append(record)
            elif match.pk and match.is_current and _refresh(match, found, kind):
                updated.append(match)  # (a match made in this run is the same new record)
    if updated:
        Regression.objects.bulk_update(updated, UPDATED_FIELDS)
    return _save(new)


def _changepoints(histories: dict[int, History], series: dict[int, Series],
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


def _detections(series: Series, history: History, direction: str | None,
                changes: list[Detection], settings: DetectionSettings):
    for found in changes:
        yield Detector.CHANGEPOINT, found, CHANGEPOINT_TOLERANCE
    if settings.hud_enabled and direction is not None:
        params = settings.hud_params(series.metric, series.benchmark)
        # An episode's run start moves with the windows until the baseline takes it in.
        tolerance = params.baseline + params.comparison
        for found in hud_policy.scan(history.values, direction, params):
            yield Detector.HUD_POLICY, found, tolerance


def _kind(detector: str, found: Detection, direction: str | None) -> str:
    if detector == Detector.HUD_POLICY:
        return found.kind
    if direction is None:
        return Regression.Kind.CHANGE
    worse = found.magnitude < 0 if direction == HIGHER else found.magnitude > 0
    return Regression.Kind.REGRESSION if worse else Regression.Kind.IMPROVEMENT


def _existing(histories: dict[int, History]) -> defaultdict[tuple[int, str], list[Regression]]:
    oldest = min(history.timestamps[0] for history in histories.values())
    found: defaultdict[tuple[int, str], list[Regression]] = defaultdict(list)
    records = Regression.objects.filter(series_id__in=list(histories), first_bad_at__gte=oldest)
    for record in records.only("id", "series_id", "detector", "first_bad_at", "state", *
                               UPDATED_FIELDS):
        found[record.series_id, record.detector].append(record)
    return found


def _record(series: Series, history: History, detector: str, found: Detection, kind: str,
            direction: str | None) -> Regression:
    """A new record (its commits are filled in by `_save`)."""
    good = found.index - 1 if found.index > 0 else None
    return Regression(
        series=series, detector=detector, kind=kind, direction=direction or "",
        first_bad_run_id=history.run_ids[found.index],
        first_bad_at=history.timestamps[found.index],
        last_good_run_id=history.run_ids[good] if good is not None else None,
        last_good_at=history.timestamps[good] if good is not None else None,
        baseline=found.before, value=found.after, magnitude=found.magnitude,
        confidence=found.confidence, points_after=found.delay,
    )


def _save(records: list[Regression]) -> list[Regression]:
    """Insert new records with their first events; one by one (skipping those a concurrent
    run inserted first) if inserting them together fails."""
    if not records:
        return []
    runs = {pk for r in records for pk in (r.first_bad_run_id, r.last_good_run_id) if pk}
    shas = dict(Run.objects.filter(pk__in=runs).values_list("pk", "head_sha"))
    for record in records:
        record.first_bad_sha = shas.get(record.first_bad_run_id, "")
        record.last_good_sha = shas.get(record.last_good_run_id, "")
    try:
        with transaction.atomic():
            Regression.objects.bulk_create(records)
            RegressionEvent.objects.bulk_create(_first_event(r) for r in records)
        return records
    except IntegrityError:
        saved = []
        for record in records:
            record.pk, record._state.adding = None, True
            try:
                with transaction.atomic():
                    record.save()
                    _first_event(record).save()
            except IntegrityError:  # a concurrent run recorded the same change first
                continue
            saved.append(record)
        return saved


def _first_event(record: Regression) -> RegressionEvent:
    return RegressionEvent(regression=record, to_state=record.state,
                           note=f"raised by the {record.get_detector_display()}")


def _refresh(record: Regression, found: Detection, kind: str) -> bool:
    """Bring a current record up to date with a detection of the same change; True if it
    changed."""
    fresh = {"kind": kind, "baseline": found.before, "value": found.after,
             "magnitude": found.magnitude, "confidence": found.confidence}
    if all(getattr(record, name) == value for name, value in fresh.items()):
        return False
    for name, value in fresh.items():
        setattr(record, name, value)
    record.updated_at = timezone.now()  # bulk_update does not apply auto_now
    return True
