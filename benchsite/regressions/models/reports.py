"""The nightly reports (the PyTorch HUD's regression report), one per repo, branch and day."""

from __future__ import annotations

from django.db import models
from django.urls import reverse


class NightlyReport(models.Model):
    """Per benchmark and device, for one repo, branch and day (UTC): how many series were
    reported and what detection made of them (the PyTorch HUD's regression report)."""

    repo = models.CharField(max_length=255)
    branch = models.CharField(max_length=255)
    day = models.DateField()
    rows = models.JSONField(default=list, help_text="one per benchmark and device: counts")
    created_at = models.DateTimeField(auto_now=True)
    notified_at = models.DateTimeField(null=True, blank=True, editable=False)
    waiting = models.BooleanField(
        default=False, editable=False, help_text="its notification waits for the "
        "confirmation of regressions of its day (sent once none is held)")

    class Meta:
        ordering = ["-day", "repo", "branch"]
        constraints = [models.UniqueConstraint(fields=["repo", "branch", "day"],
                                               name="one_report_per_day")]

    def __str__(self) -> str:
        return f"{self.repo}@{self.branch} {self.day}"

    def get_absolute_url(self) -> str:
        return reverse("regressions:report", args=[self.pk])
