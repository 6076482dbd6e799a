"""Confirming a regression before it is told (issue 32): an A/B try job of the cell that
measured it, at its last good and first bad commits, interleaved on one worker.

This app asks for a confirmation and records its verdict; running it is the bisects app's,
which sits above this one (import-linter's layers): it hands its starter in when it is ready
(`serve_confirmations`). Without one (or for a series no job measured) a regression is "not
confirmable" and is told as before.

The settings (`DetectionSettings.confirm_*`): "wait" holds a regression's notification
(`Regression.held_until`), and its night's report (`report.send_waiting`), until its
verdict or the time limit ("unconfirmed"); "at_once" tells it at once and confirms beside;
"off" asks nothing. A regression that is not reproduced
is not told, and is marked false positive with the reason unless a person triaged it first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import timedelta

from django.utils import timezone

from benchsite.regressions.models import (
    ConfirmMode,
    DetectionSettings,
    Detector,
    Regression,
)
from benchsite.regressions.notify import notify_regressions
from benchsite.regressions.report import send_waiting

logger = logging.getLogger(__name__)
Confirmation = Regression.Confirmation
# An A/B measures numbers: a pass that became a failure, or a metric gone, is not confirmed.
CONFIRMABLE_DETECTORS = (Detector.CHANGEPOINT, Detector.HUD_POLICY)
NO_JOB = "uploaded without a job of this site (CI?): no spec to measure again"

# (regression) -> "" once its A/B try job is queued, else why it cannot be
Starter = Callable[[Regression], str]
_starter: Starter | None = None


def serve_confirmations(starter: Starter | None) -> None:
    """Called by the bisects app when it is ready."""
    global _starter  # the one hook, filled in at startup
    _starter = starter


def request(regressions: Sequence[Regression]) -> list[Regression]:
    """Ask for the confirmation of each new regression of a notified kind; returns those
    queued. Call before `notify_regressions`: what waits is held by then."""
    settings = DetectionSettings.load()
    if settings.confirm_mode == ConfirmMode.OFF:
        return []
    queued = []
    for regression in regressions:
        if regression.kind not in Regression.NOTIFIED_KINDS or regression.confirmation:
            continue
        if regression.detector not in CONFIRMABLE_DETECTORS:
            _not_confirmable(regression, f"a {regression.get_detector_display()} is not "
                                         "measured by an A/B try job")
            continue
        if regression.environment_change_id is not None:
            # Both commits measured today on one machine share its environment: the A/B
            # would say "not reproduced" of a real change, and mark it a false positive.
            _not_confirmable(regression, "it coincides with a change of the runs' "
                                         "environment, which an A/B of its commits on one "
                                         "machine does not reproduce")
            continue
        if not regression.last_good_sha or regression.last_good_sha == regression.first_bad_sha:
            _not_confirmable(regression, "no last good commit before its first bad one")
            continue
        # Pending (and held) before the try job is queued: run in-process, it ends at once.
        held = (timezone.now() + timedelta(minutes=settings.confirm_time_limit_minutes)
                if settings.confirm_mode == ConfirmMode.WAIT else None)
        _set(regression, confirmation=Confirmation.PENDING, confirmation_note="",
             held_until=held)
        try:
            reason = _starter(regression) if _starter is not None else NO_JOB
        except Exception as error:  # told as before rather than held for nothing
            logger.exception("regression %s: its confirmation could not be queued",
                             regression.pk)
            reason = f"its try job could not be queued: {error}"
        if reason:
            _not_confirmable(regression, reason)
        else:
            queued.append(regression)
    return queued


def _not_confirmable(regression: Regression, reason: str) -> None:
    _set(regression, confirmation=Confirmation.NOT_CONFIRMABLE,
         confirmation_note=reason[:500], held_until=None)


def _set(regression: Regression, **fields) -> None:
    Regression.objects.filter(pk=regression.pk).update(**fields)
    for name, value in fields.items():
        setattr(regression, name, value)


def record(regression: Regression, confirmation: str, note: str, *,
           bisecting: bool = False) -> bool:
    """The verdict of its try job; False when it is no longer pending (a verdict already
    recorded, or the time limit passed). Not reproduced: marked false positive with the
    note, unless a person triaged it. `bisecting`: a bisect follows, and a held notification
    waits for it (`bisect_ended`)."""
    if not Regression.objects.filter(pk=regression.pk, confirmation=Confirmation.PENDING).update(
            confirmation=confirmation, confirmation_note=note[:500],
            held_until=regression.held_until if bisecting else None):
        return False
    regression.refresh_from_db()
    if confirmation == Confirmation.NOT_REPRODUCED:
        _invalidate(regression, note)
    elif regression.held_until is None:
        notify_regressions([regression])
    send_waiting()
    return True


def _invalidate(regression: Regression, note: str) -> None:
    """False positive, by the system, unless a person has triaged it (re-opened it too)."""
    if regression.state == Regression.State.OPEN and not regression.events.filter(
            user__isnull=False).exists():
        regression.triage(Regression.State.FALSE_POSITIVE, note=f"not reproduced: {note}")


def bisect_ended(regression: Regression, culprit: dict | None) -> bool:
    """A bisect of the regression ended: its culprit (if found) is written on it and, when
    the regression was confirmed and held for it, its notification, naming it, sent; True
    when this call released it (a bisect that ends while the confirmation is pending does
    not)."""
    if culprit:
        Regression.objects.filter(pk=regression.pk).update(culprit=culprit)
    released = Regression.objects.filter(
        pk=regression.pk, held_until__isnull=False, confirmation=Confirmation.CONFIRMED,
    ).update(held_until=None)
    if released:
        regression.refresh_from_db()
        notify_regressions([regression])
        send_waiting()
    return bool(released)


def release_overdue() -> int:
    """Past their time limit: pending regressions become "unconfirmed", and those waiting
    for a bisect go without the culprit; both are told. Returns how many."""
    now = timezone.now()
    overdue = list(Regression.objects.filter(held_until__lt=now))
    released = []
    for regression in overdue:
        fields = {"held_until": None}
        if regression.confirmation == Confirmation.PENDING:
            fields.update(confirmation=Confirmation.UNCONFIRMED,
                          confirmation_note="no verdict within the time limit")
        if Regression.objects.filter(pk=regression.pk, held_until=regression.held_until,
                                     confirmation=regression.confirmation).update(**fields):
            for name, value in fields.items():
                setattr(regression, name, value)
            released.append(regression)
    if released:
        notify_regressions(released)
    send_waiting()
    return len(released)
