"""Confirming regressions with A/B try jobs (issue 32), for `regressions.confirmation`: the
starter it is handed (the job's cell at the last good and first bad commits, through
`start.start_confirmation`), the verdict of the try job once it ended, and the bisect a
confirmed regression starts (DetectionSettings.confirm_auto_bisect), whose culprit its held
notification then names."""

from __future__ import annotations

import logging
import math

from django.utils import timezone

from benchsite.bisects.lab import label
from benchsite.bisects.models import Bisect
from benchsite.bisects.signals import bisect_ended
from benchsite.bisects.start import BisectRefused, start_confirmation, start_regression
from benchsite.regressions import confirmation
from benchsite.regressions.models import DetectionSettings, Regression

logger = logging.getLogger(__name__)
Confirmation = Regression.Confirmation


def connect() -> None:
    confirmation.serve_confirmations(start)
    bisect_ended.connect(ended, sender=Bisect, dispatch_uid="bisects.confirm.ended")


def start(regression: Regression) -> str:
    """Queue its try job; "" when queued, else why it cannot be."""
    try:
        start_confirmation(regression)
    except BisectRefused as error:
        return str(error)
    return ""


def verdict(bisect: Bisect) -> tuple[str, str]:
    """(confirmation, note) of an ended try job: confirmed when the followed series changed
    the worse way, significantly, by at least half the detected change in log scale (the
    bisect's halfway point: a detected 4x slowdown needs 2x); a change that large but not
    significant is unconfirmed (told: a real regression is never invalidated by noise); not
    reproduced only when the change measured is smaller. The change and its significance
    are the bisection's (`execute.ab_series`: pairs of rounds, so a burst on one round does
    not confirm)."""
    where = f"A/B try job {bisect.pk}"
    if bisect.state != Bisect.State.FINISHED:
        message = (bisect.outcome or {}).get("message", "").strip().splitlines()
        return Confirmation.UNCONFIRMED, f"{where} {bisect.state}: {message[-1] if message else ''}"
    name = label(bisect.cells[0]["key"], bisect.metric)
    row = next((row for row in bisect.outcome.get("series", []) if row["series"] == name), None)
    if row is None:
        return Confirmation.UNCONFIRMED, f"{where} did not measure {bisect.metric}"
    change, p = row["change"], row["p_value"]
    if p is None:  # too few repetitions to judge: no verdict, rather than a wrong one
        return Confirmation.UNCONFIRMED, f"{change:+.1%}, too few values to judge, {where}"
    said = f"{change:+.1%}, p={p:.2g}"
    detected = bisect.regression.magnitude
    large = (change * bisect.worse > 0 and change > -1
             and abs(math.log1p(change)) >= abs(math.log1p(detected)) / 2)
    if large and row["significant"]:
        return Confirmation.CONFIRMED, f"{said}, {where}"
    if large:  # as large as detected but noisy (a busy worker?): told, not invalidated
        return Confirmation.UNCONFIRMED, f"{said}, not significant, {where}"
    return Confirmation.NOT_REPRODUCED, (
        f"{said}, {where}: not a significant change the worse way of half the detected "
        f"{detected:+.1%} (log scale) or more")


def ended(sender, bisect: Bisect, **kwargs) -> None:
    regression = bisect.regression
    if regression is None:
        return
    if bisect.confirms:
        confirmed(bisect, regression)
    elif bisect.kind == Bisect.Kind.BISECT:
        culprit = bisect.outcome.get("culprit") if bisect.culprit_sha else None
        if culprit:
            culprit = {key: culprit[key] for key in ("sha", "subject", "author", "url")}
            culprit["bisect_url"] = bisect.get_absolute_url()
        if confirmation.bisect_ended(regression, culprit) and culprit:
            # its alert named the culprit: no second message (bisects.notify.tell_culprit)
            Bisect.objects.filter(pk=bisect.pk, notified_at__isnull=True).update(
                notified_at=timezone.now())


def confirmed(bisect: Bisect, regression: Regression) -> None:
    """Record the try job's verdict; a confirmed regression starts its bisect if set to."""
    state, note = verdict(bisect)
    bisects = state == Confirmation.CONFIRMED and DetectionSettings.load().confirm_auto_bisect
    if not confirmation.record(regression, state, note, bisecting=bisects) or not bisects:
        return
    try:
        start_regression(regression)
    except BisectRefused as error:
        logger.warning("regression %s: confirmed, not bisected: %s", regression.pk, error)
        confirmation.bisect_ended(regression, None)
