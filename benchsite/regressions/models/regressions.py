"""Regressions found in result series, the groups they are told in, and their triage
history."""

from __future__ import annotations

from django.conf import settings
from django.db import models, transaction
from django.urls import reverse
from django.utils import timezone

from benchsite.comparison.directions import DIRECTIONS, Direction, directions_for
from benchsite.results.models import EnvironmentChange, Result, Run, Series


class Detector(models.TextChoices):
    CHANGEPOINT = "changepoint", "change point"
    HUD_POLICY = "hud_policy", "HUD policy"
    ACCURACY = "accuracy", "accuracy check"  # a pass-like result became a failure
    MISSING = "missing", "missing metric"  # a run still reports, without this metric


class AlertGroup(models.Model):
    """Regressions of one repo and branch found together whose commit ranges overlap: one
    change seen in many series, told and triaged once. Its range is the members'
    intersection: the last good commit is the latest of theirs, the first bad the earliest."""

    repo = models.CharField(max_length=255)
    branch = models.CharField(max_length=255)
    last_good_sha = models.CharField(max_length=255, blank=True)
    last_good_at = models.DateTimeField(null=True, blank=True)
    first_bad_sha = models.CharField(max_length=255)
    first_bad_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    notified_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-first_bad_at", "-id"]
        indexes = [models.Index(fields=["repo", "branch", "-first_bad_at"]),
                   models.Index(fields=["-created_at"])]

    def __str__(self) -> str:
        good = self.last_good_sha[:10] or "?"
        return f"{self.repo}@{self.branch} {good}..{self.first_bad_sha[:10]}"

    def get_absolute_url(self) -> str:
        return reverse("regressions:group", args=[self.pk])

    def overlaps(self, last_good_at, first_bad_at) -> bool:
        """Whether a range (last good, first bad] overlaps this group's."""
        return ((last_good_at is None or last_good_at < self.first_bad_at)
                and (self.last_good_at is None or self.last_good_at < first_bad_at))

    def narrow(self, regression: Regression) -> None:
        """Take a member's range in: the intersection of both."""
        if regression.first_bad_at < self.first_bad_at:
            self.first_bad_at, self.first_bad_sha = (regression.first_bad_at,
                                                     regression.first_bad_sha)
        if regression.last_good_at is not None and (
                self.last_good_at is None or regression.last_good_at > self.last_good_at):
            self.last_good_at, self.last_good_sha = (regression.last_good_at,
                                                     regression.last_good_sha)


class Regression(models.Model):
    """A change a detector found in a series: where (the commit range), how big, and what
    people decided about it."""

    class State(models.TextChoices):
        OPEN = "open"
        ACKNOWLEDGED = "acknowledged"
        FIXED = "fixed"
        EXPECTED = "expected"
        FALSE_POSITIVE = "false_positive", "false positive"

    class Kind(models.TextChoices):
        REGRESSION = "regression"
        IMPROVEMENT = "improvement"
        SUSPICIOUS = "suspicious"  # HUD policy: 3+ violations in a row, not the latest
        CHANGE = "change", "change (direction unknown)"

    class Confirmation(models.TextChoices):
        """Whether an A/B try job of the job's cell reproduced the change (issue 32)."""

        NONE = "", "not asked"  # confirmation off, or raised before it existed
        PENDING = "pending", "confirmation pending"
        CONFIRMED = "confirmed", "confirmed"
        NOT_REPRODUCED = "not_reproduced", "not reproduced"
        # no verdict within the time limit, or the try job failed
        UNCONFIRMED = "unconfirmed", "unconfirmed"
        NOT_CONFIRMABLE = "not_confirmable", "not confirmable"  # e.g. uploaded by CI, no job

    CURRENT = (State.OPEN, State.ACKNOWLEDGED)
    NOTIFIED_KINDS = (Kind.REGRESSION, Kind.CHANGE)

    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="regressions")
    branch = models.CharField(max_length=255, help_text="the history it was found in")
    group = models.ForeignKey(AlertGroup, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="members")
    detector = models.CharField(max_length=20, choices=Detector.choices,
                                help_text="the detector that raised it")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    direction = models.CharField(max_length=10, choices=DIRECTIONS, blank=True,
                                 help_text="the metric's better direction; blank: unknown")
    last_good_run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="+")
    last_good_sha = models.CharField(max_length=255, blank=True)
    last_good_at = models.DateTimeField(null=True, blank=True)
    first_bad_run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="+")
    first_bad_sha = models.CharField(max_length=255)
    first_bad_at = models.DateTimeField()
    baseline = models.FloatField(
        help_text="level before the change (accuracy and missing metric: 1, a pass / present)")
    value = models.FloatField(help_text="level after the change (0: a failure / absent)")
    magnitude = models.FloatField(help_text="relative change, signed: 0.12 is 12 % up")
    confidence = models.FloatField(
        null=True, blank=True,
        help_text="change point: p-value; HUD policy: violations in a row")
    points_after = models.PositiveIntegerField(
        default=0, help_text="points at the new level when it was raised")
    detected_at = models.DateTimeField(
        null=True, blank=True, help_text="the time of the newest point when it was raised")
    evidence = models.JSONField(
        default=dict, blank=True,
        help_text="what other detectors said of the same change, by detector: the HUD "
        "policy's verdict, magnitude and violations")
    state = models.CharField(max_length=20, choices=State.choices, default=State.OPEN)
    confirmation = models.CharField(max_length=20, choices=Confirmation.choices, blank=True,
                                    default=Confirmation.NONE)
    confirmation_note = models.CharField(
        max_length=500, blank=True, help_text="the try job's change and p-value, or why it "
        "could not confirm")
    held_until = models.DateTimeField(
        null=True, blank=True, editable=False,
        help_text="its notification waits for its confirmation (and the bisect a confirmation "
        "starts) until then at the latest; empty: not held")
    environment_change = models.ForeignKey(
        EnvironmentChange, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="regressions", help_text="a change of the runs' environment on its "
        "device within its commit range (last good, first bad]: the likelier cause")
    culprit = models.JSONField(default=dict, blank=True, editable=False,
                               help_text="the culprit a bisect found: sha, subject, author, url, "
                               "bisect_url")
    notes = models.TextField(blank=True)
    notified_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-first_bad_at", "-id"]
        constraints = [
            # One record per change: concurrent detection runs cannot raise it twice. Its
            # index also serves detection's lookup of a series' records near a change and
            # the chart markers of a series.
            models.UniqueConstraint(fields=["series", "detector", "first_bad_at"],
                                    name="one_regression_per_change"),
        ]
        indexes = [
            # the regressions page: current (or another state's) regressions, newest first
            models.Index(fields=["state", "-first_bad_at"]),
            # the nightly report: what was raised in a night
            models.Index(fields=["detected_at"]),
        ]

    def __str__(self) -> str:
        if self.detector in (Detector.ACCURACY, Detector.MISSING):
            return f"{self.get_detector_display()} in {self.series}"
        return f"{self.get_kind_display()} {self.magnitude:+.1%} in {self.series}"

    def get_absolute_url(self) -> str:
        return reverse("regressions:detail", args=[self.pk])

    @property
    def confirmation_text(self) -> str:
        """As the pages and notifications say it: 'confirmed (+12.3 %, p=0.002)'."""
        if not self.confirmation:
            return ""
        shown = self.get_confirmation_display()
        return f"{shown} ({self.confirmation_note})" if self.confirmation_note else shown

    @property
    def environment_text(self) -> str:
        """'environment: torch 2.13.0.dev20261120 -> ...' when it coincides with a change of
        the runs' environment, else ''."""
        change = self.environment_change
        return f"environment: {change.summary}" if change is not None else ""

    @property
    def is_current(self) -> bool:
        return self.state in self.CURRENT

    def direction_now(self) -> Direction:
        """Which way is better for the series' metric now (an override set since it was
        raised counts), and why: an override, the contract's table, inference from its name
        and unit (that of the first bad point), or unknown."""
        unit = (Result.objects.filter(series_id=self.series_id, run_id=self.first_bad_run_id)
                .values_list("extra_info__unit", flat=True).first())
        return directions_for([self.series], {self.series_id: str(unit or "")})[self.series_id]

    @property
    def direction_rule(self) -> str:
        """Why the series' metric is judged the way it is now (`direction_now`)."""
        return self.direction_now().rule

    def triage(self, state: str, user=None, note: str = "") -> bool:
        """Move to `state` (or, with the same state, just add the note) and record who and
        when; False if nothing was recorded: the same state and no note, or the state
        changed meanwhile (someone else triaged it first)."""
        if state not in self.State.values:
            raise ValueError(f"state={state!r}: must be one of {self.State.values}")
        if state == self.state and not note:
            return False
        with transaction.atomic():
            moved = Regression.objects.filter(pk=self.pk, state=self.state).update(
                state=state, updated_at=timezone.now())
            if not moved:
                return False
            RegressionEvent.objects.create(regression=self, user=user, from_state=self.state,
                                           to_state=state, note=note)
        self.state = state
        return True


class RegressionEvent(models.Model):
    """One change of a regression's state: who (None: the system), when, from, to, why."""

    regression = models.ForeignKey(Regression, on_delete=models.CASCADE, related_name="events")
    created_at = models.DateTimeField(auto_now_add=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.SET_NULL)
    from_state = models.CharField(max_length=20, blank=True)
    to_state = models.CharField(max_length=20)
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.from_state or 'new'} -> {self.to_state}"
