"""The changes detection recorded in series: where a series' level starts, for stored
baselines (`comparison.stored_baselines`), commit comparisons and the nightly report."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

from django.db.models import Q

from benchsite.regressions.models import Detector, Regression


def recorded_changes(series_ids: Iterable[int], branches: list[str],
                     until: datetime | None = None,
                     raised_by: datetime | None = None) -> dict[int, list[datetime]]:
    """Each series' recorded changes (first bad points), sorted, up to `until`; with
    `raised_by`, only those raised by then (`detected_at`, else the record's creation), as
    a report of a past night knew them."""
    found = (Regression.objects  # (false positives are not changes)
             .filter(series_id__in=list(series_ids), branch__in=branches,
                     detector=Detector.CHANGEPOINT)
             .exclude(state=Regression.State.FALSE_POSITIVE))
    if until is not None:
        found = found.filter(first_bad_at__lte=until)
    if raised_by is not None:
        found = found.filter(Q(detected_at__lte=raised_by)
                             | Q(detected_at__isnull=True, created_at__lte=raised_by))
    changes: defaultdict[int, list[datetime]] = defaultdict(list)
    for pk, at in found.order_by("first_bad_at").values_list("series_id", "first_bad_at"):
        changes[pk].append(at)
    return changes
