"""Benchmark jobs: a spec snapshot expanded into cells, each cell one Celery task."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import models

from benchsite import links
from benchsite.results.models import Run

# A job run without a commit measures whatever the worker has installed: its runs are on
# this branch, never a point of a default branch's history (detection, comparisons' history),
# and their sha is the job's own name on it (adhoc_sha), which no git commit can be.
ADHOC_BRANCH = "adhoc"


def adhoc_sha(job_id: int) -> str:
    return f"adhoc-job-{job_id}"


class Job(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        PARTIALLY_FAILED = "partially_failed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    ENDED = (Status.SUCCEEDED, Status.PARTIALLY_FAILED, Status.FAILED, Status.CANCELLED)

    class Via(models.TextChoices):
        API = "api"
        ADMIN = "admin"
        COMMAND = "command"
        SCHEDULE = "schedule"

    name = models.CharField(max_length=255, help_text="the spec's file or config name")
    family = models.CharField(max_length=50, default="quantization",
                              help_text="the spec's benchmark family (runner.families)")
    spec_yaml = models.TextField(help_text="the spec as submitted (a snapshot)")
    queue = models.CharField(max_length=100)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    submitted_via = models.CharField(max_length=20, choices=Via.choices)
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    submitted_token = models.ForeignKey(
        "results.UploadToken", null=True, blank=True, on_delete=models.SET_NULL
    )
    config = models.ForeignKey(
        "catalog.BenchmarkConfig", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="jobs", help_text="the benchmark config it ran, if any"
    )
    # Run metadata of the results (what was benchmarked).
    repo = models.CharField(max_length=255)
    head_branch = models.CharField(max_length=255)
    head_sha = models.CharField(max_length=255)
    timing = models.JSONField(default=dict, blank=True,
                              help_text="runner TimingSettings overrides, e.g. {'samples': 10}")
    cells_total = models.PositiveIntegerField(default=0)
    cells_done = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(
        null=True, blank=True,
        help_text="when its cells' tasks were last handed to the broker; empty while the "
                  "broker could not take them (the sweeper queues them when it is back)")

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status"])]  # the active-jobs list

    def __str__(self) -> str:
        return f"job {self.pk}: {self.name} on {self.queue}"

    def get_absolute_url(self) -> str:
        return links.job_url(self.pk)

    @property
    def adhoc(self) -> bool:
        """Run without a commit (ADHOC_BRANCH)."""
        return self.head_branch == ADHOC_BRANCH

    @property
    def ended(self) -> bool:
        return self.status in self.ENDED

    def dashboard_url(self) -> str:
        """The dashboard page of this job's family (the dashboards' family pages say
        which), at this job's results where it can be; "" when no page shows the family."""
        return links.family_page_url(self.family, self.repo, self.head_branch, self.head_sha)

    def run_metadata(self) -> dict[str, object]:
        """The v3 run fields of the results this job stores. A run names the job; the job is
        found from a run through its upload (JobCell.upload), not through these fields."""
        return {"repo": self.repo, "head_branch": self.head_branch, "head_sha": self.head_sha,
                # The run's identity digests these fields: the job's id keeps two jobs of one
                # name at one sha (a config re-run) in runs of their own.
                "workflow_id": self.pk, "run_attempt": 1, "name": self.name}

    def runs(self) -> models.QuerySet[Run]:
        """The runs its cells' results created."""
        return Run.objects.filter(upload__jobcell__job=self)


class JobCell(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        SKIPPED = "skipped"
        FAILED = "failed"
        CANCELLED = "cancelled"

    ENDED = (Status.SUCCEEDED, Status.SKIPPED, Status.FAILED, Status.CANCELLED)

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="cells")
    index = models.PositiveIntegerField()
    key = models.CharField(max_length=500, help_text="recipe / shape / model type / compile")
    cell = models.JSONField(help_text="the planned cell (runner.cells.Planned.cell)")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True, help_text="skip reason, or the failure's traceback")
    worker = models.CharField(max_length=255, blank=True)
    measured_s = models.FloatField(null=True, blank=True, help_text="time inside timed calls")
    unstable = models.BooleanField(
        default=False, help_text="its speedup's 95% interval stayed wider than the target")
    upload = models.ForeignKey("results.Upload", null=True, blank=True,
                               on_delete=models.SET_NULL)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True,
        help_text="written by the worker while the cell runs; a stale one means the worker "
                  "is gone (BENCH_HEARTBEAT_TIMEOUT)")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job", "index"]
        constraints = [models.UniqueConstraint(fields=["job", "index"], name="job_cell_index")]

    def __str__(self) -> str:
        return f"{self.job_id}/{self.index} {self.key}"

    @property
    def files(self) -> Path:
        """The folder this cell's files (profiles, traces, snapshots) go to on its worker: a
        spec's paths are relative to it (runner.engine.folders)."""
        return Path(settings.BENCH_FILES_DIR) / "jobs" / str(self.job_id) / str(self.index)
