"""Where alerts go, and the stopped-reporting alerts."""

from __future__ import annotations

import fnmatch

from django.core.exceptions import ValidationError
from django.db import models

from benchsite.results.models import Series


class NotificationTarget(models.Model):
    """Where new regressions and stopped-reporting alerts are sent."""

    class Kind(models.TextChoices):
        WEBHOOK = "webhook", "webhook (generic JSON)"
        SLACK = "slack", "Slack-compatible webhook"
        EMAIL = "email"

    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    url = models.URLField(max_length=500, blank=True, help_text="webhook and Slack targets")
    email = models.EmailField(blank=True, help_text="email targets")
    repo = models.CharField(max_length=255, blank=True,
                            help_text="only these repos (pattern, e.g. 'pytorch/*'); blank: all")
    benchmark = models.CharField(max_length=255, blank=True,
                                 help_text="only these benchmarks (pattern); blank: all")
    enabled = models.BooleanField(default=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"

    def clean(self) -> None:
        if self.kind == self.Kind.EMAIL and not self.email:
            raise ValidationError({"email": "an email target needs an address"})
        if self.kind != self.Kind.EMAIL and not self.url:
            raise ValidationError({"url": f"a {self.kind} target needs a URL"})

    def matches(self, repo: str, benchmark: str) -> bool:
        return (fnmatch.fnmatchcase(repo, self.repo or "*")
                and fnmatch.fnmatchcase(benchmark, self.benchmark or "*"))


class SilenceAlert(models.Model):
    """A device (series=None) or a series that reported regularly and went silent."""

    key = models.CharField(max_length=800, help_text="repo, device, arch and series id")
    repo = models.CharField(max_length=255)
    device = models.CharField(max_length=255, blank=True)
    arch = models.CharField(max_length=255, blank=True)
    series = models.ForeignKey(Series, null=True, blank=True, on_delete=models.CASCADE,
                               related_name="silence_alerts")
    last_seen = models.DateTimeField(help_text="its last result before the silence")
    usual_gap = models.DurationField(help_text="median time between its runs")
    runs_seen = models.PositiveIntegerField(help_text="runs the usual gap was taken from")
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True,
                                       help_text="when results arrived again (or it was "
                                       "resolved by hand)")
    notified_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        constraints = [
            # one alert per silence: the periodic check cannot raise it twice
            models.UniqueConstraint(fields=["key", "last_seen"], name="one_alert_per_silence"),
        ]
        indexes = [
            # the regressions page and the periodic check: active alerts
            models.Index(fields=["resolved_at", "-last_seen"]),
        ]

    def __str__(self) -> str:
        return f"{self.subject} silent since {self.last_seen:%Y-%m-%d %H:%M}"

    @property
    def subject(self) -> str:
        where = " ".join(part for part in (self.arch or self.device, self.repo) if part)
        return f"series {self.series} on {where}" if self.series_id else where
