"""Benchmark results: uploads (raw payloads kept), runs, time series and their results.

Sized for tens of millions of results: a result row holds only foreign keys, its timestamp,
numbers and the rarely-present JSON; everything that identifies a time series lives once in
`Series`, and everything about a CI job once in `Run`.
"""

from __future__ import annotations

import functools
import hashlib
import operator
import secrets
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from isal import igzip

from benchsite.results.fields import FloatListField, OrjsonField
from runner.contract.repos import RepoNameError, check_patterns, grants, is_repo

TOKEN_PREFIX = "bst_"


def upload_only() -> list[str]:
    return [UploadToken.Scope.UPLOAD]


class UploadToken(models.Model):
    """A bearer token for the API, scoped to repos and to what it may do (`scopes`): only
    its SHA-256 is stored."""

    class Scope(models.TextChoices):
        UPLOAD = "upload", "upload results for its repos"
        SUBMIT_JOBS = "submit_jobs", "submit and cancel jobs for its repos, on its queues"
        RUN_CODE = "run_code", ("with submit_jobs: submit specs that carry Python of their own "
                                "(instruction-count definitions), which workers run as written")
        READ = "read", "read the API when BENCH_LOGIN_REQUIRED is on"

    name = models.CharField(max_length=100, help_text="what uses it, e.g. 'pytorch/ao CI'")
    repos = models.JSONField(
        default=list,
        help_text="repos it may upload for: 'owner/name', or patterns like 'owner/*'",
    )
    scopes = models.JSONField(default=upload_only, help_text="what it may do (Scope values)")
    queues = models.JSONField(default=list, blank=True,
                              help_text="the job queues it may submit to (with submit_jobs)")
    prefix = models.CharField(max_length=12, editable=False, help_text="start of the token")
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    is_active = models.BooleanField(default=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @staticmethod
    def hash(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def issue(self) -> str:
        """Give this token a new secret and return it; it is never shown again."""
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.prefix = secret[:12]
        self.digest = self.hash(secret)
        return secret

    def clean(self) -> None:
        try:
            check_patterns(self.repos, "repos")
        except RepoNameError as error:
            raise ValidationError({"repos": str(error)}) from None

    def allows(self, repo: str) -> bool:
        return is_repo(repo) and any(grants(pattern, repo) for pattern in self.repos)

    def can(self, scope: str) -> bool:
        return scope in self.scopes


class Upload(models.Model):
    """One accepted upload: its raw payload, so results can be re-derived.

    Delete uploads with `ingest.delete_uploads` (the admin does): the ORM's cascade would
    take the whole runs this upload created, with other uploads' results in them.
    """

    # 4 bytes (migration 0019): each result refers to a run, a series and an upload
    id = models.AutoField(primary_key=True)

    class Source(models.TextChoices):
        API = "api"
        DEMO = "demo"
        WORKER = "worker"

    # When it was received: also the time of its records that carry none, so `rederive`
    # gives them the same (set by `store_upload`, not when the row is inserted).
    created_at = models.DateTimeField(default=timezone.now, editable=False, db_index=True)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.API)
    token = models.ForeignKey(UploadToken, null=True, blank=True, on_delete=models.SET_NULL)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True,
                                       help_text="unique per token (among workers' uploads)")
    content_hash = models.CharField(max_length=64, unique=True)
    payload_gzip = models.BinaryField(help_text="the request body as received, gzip-compressed")
    request_metadata = models.JSONField(default=dict, blank=True)
    record_count = models.PositiveIntegerField(default=0)
    repos = models.JSONField(default=list)
    detection_owed_at = models.DateTimeField(
        null=True, blank=True, db_index=True,
        help_text="set with the upload when regression detection is owed (when it was last "
                  "queued); cleared once done. The sweeper queues it again if its task was "
                  "lost (BENCH_DETECTION_RETRY_AFTER)")
    detection_attempts = models.PositiveSmallIntegerField(
        default=0, help_text="detection runs started since it last succeeded; after "
                             "BENCH_DETECTION_MAX_ATTEMPTS it is no longer retried")
    detection_error = models.TextField(
        blank=True, help_text="why its detection last failed; with no detection owed: it "
                              "was given up (cleared when a detection succeeds)")

    class Meta:
        permissions = [("download_payload", "Can download raw upload payloads of its repos")]
        constraints = [
            # Two tokens may pick the same key; workers (no token) share one set. The uploads
            # of a deleted token keep their keys unchecked: nobody can send that token again.
            models.UniqueConstraint(fields=["token", "idempotency_key"],
                                    condition=models.Q(token__isnull=False),
                                    name="upload_key_per_token"),
            models.UniqueConstraint(fields=["idempotency_key"],
                                    condition=models.Q(token__isnull=True, source="worker"),
                                    name="upload_key_of_workers"),
        ]

    def __str__(self) -> str:
        return f"upload {self.pk} ({self.record_count} records)"

    def payload(self) -> bytes:
        return igzip.decompress(self.payload_gzip)


class RunQuerySet(models.QuerySet):
    def of_commit(self, repo: str, sha: str) -> RunQuerySet:
        """The runs of one commit of `repo`."""
        return self.filter(repo=repo, head_sha=sha)


class Run(models.Model):
    """A CI job (or worker job) on one runner: where and on what a set of results came from."""

    # 4 bytes (migration 0019): each result refers to a run, a series and an upload
    id = models.AutoField(primary_key=True)

    identity = models.CharField(max_length=64, unique=True)
    repo = models.CharField(max_length=255)
    head_branch = models.CharField(max_length=255)
    head_sha = models.CharField(max_length=255)
    workflow_id = models.BigIntegerField(default=0)
    run_attempt = models.IntegerField(default=1)
    job_id = models.BigIntegerField(default=0)
    name = models.CharField(max_length=255, blank=True)
    timestamp = models.DateTimeField(help_text="earliest record timestamp of the run")
    # With `timestamp`, the bounds of its results' times: a run's results are read within
    # them, so that on PostgreSQL only the months holding them are read (results.partitions).
    last_timestamp = models.DateTimeField(help_text="latest record timestamp of the run")
    device = models.CharField(max_length=255, blank=True)
    arch = models.CharField(max_length=255, blank=True)
    runners = models.JSONField(default=list, blank=True)
    dependencies = models.JSONField(default=dict, blank=True)
    extra = models.JSONField(default=dict, blank=True)
    environment = models.JSONField(
        default=dict, blank=True, help_text="its fingerprint (results.environment): "
        "dependencies, runtimes, GPU, CPU, driver... as name -> text")
    environment_hash = models.CharField(max_length=64, blank=True,
                                        help_text="of the fingerprint; blank: none known")
    upload = models.ForeignKey(Upload, on_delete=models.CASCADE, related_name="runs")
    result_count = models.PositiveIntegerField(default=0)

    objects = RunQuerySet.as_manager()

    class Meta:
        indexes = [
            # runs of a branch, newest first (run list, trend pickers)
            models.Index(fields=["repo", "head_branch", "-timestamp"]),
            # results of a commit (commit comparison, CI gate)
            models.Index(fields=["repo", "head_sha"]),
            models.Index(fields=["-timestamp"]),
        ]

    def __str__(self) -> str:
        return f"{self.repo}@{self.head_sha[:10]} {self.name} ({self.device})"


class EnvironmentChange(models.Model):
    """The environment of a job's runs on one device and branch changed between two
    consecutive runs (by time): a new torch nightly, driver, CUDA, card...
    (`results.environment`). Per job: two jobs on one machine may install different
    packages, and their runs interleave."""

    repo = models.CharField(max_length=255)
    branch = models.CharField(max_length=255)
    device = models.CharField(max_length=255, blank=True)
    arch = models.CharField(max_length=255, blank=True)
    name = models.CharField(max_length=255, blank=True, help_text="the runs' job name")
    before_run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    after_run = models.OneToOneField(Run, on_delete=models.CASCADE,
                                     related_name="environment_change")
    at = models.DateTimeField(help_text="the after run's time: the first run in it")
    changes = models.JSONField(default=list, help_text="[{key, before, after}]")
    summary = models.CharField(max_length=1000, help_text="what changed, as a line")

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["repo", "branch", "device", "arch", "at"]),
                   models.Index(fields=["repo", "branch", "at"])]

    def __str__(self) -> str:
        return f"{self.arch or self.device} {self.at:%Y-%m-%d}: {self.summary}"

    def as_json(self) -> dict:
        """What the pages' JSON says of it: the runs as ids."""
        return {"summary": self.summary, "changes": self.changes, "at": self.at.isoformat(),
                "before_run": self.before_run_id, "after_run": self.after_run_id}


class Series(models.Model):
    """One time series: what was measured, where, and which metric."""

    # 4 bytes (migration 0019): each result refers to a run, a series and an upload
    id = models.AutoField(primary_key=True)

    identity = models.CharField(max_length=64, unique=True)
    repo = models.CharField(max_length=255)
    benchmark = models.CharField(max_length=255)
    mode = models.CharField(max_length=255, blank=True)
    dtype = models.CharField(max_length=255, blank=True)
    model = models.CharField(max_length=255)
    model_type = models.CharField(max_length=255, blank=True)
    backend = models.CharField(max_length=255, blank=True)
    suite = models.CharField(max_length=255, blank=True, help_text="model.origins[0]")
    origins = models.JSONField(default=list, blank=True)
    device = models.CharField(max_length=255, blank=True)
    arch = models.CharField(max_length=255, blank=True)
    metric = models.CharField(max_length=255)
    extra_info = models.JSONField(
        default=dict, blank=True, help_text="identifying benchmark/model extra_info and inputs"
    )
    compile_mode = models.CharField(
        max_length=255, blank=True, help_text="benchmark.extra_info.torch_compile_mode"
    )

    class Meta:
        verbose_name_plural = "series"
        indexes = [
            # dashboard filters start from repo + benchmark, then narrow by metric or model
            models.Index(fields=["repo", "benchmark", "metric"]),
            models.Index(fields=["repo", "benchmark", "model"]),
            models.Index(fields=["repo", "device", "arch"]),
            # the busiest device or benchmark of a repo (`dashboards.filters.busiest`),
            # counted from the index alone: 8.5 -> 3.8 ms for TorchInductor's 18,432 series
            models.Index(fields=["repo", "benchmark", "arch"], name="series_busiest"),
        ]

    def __str__(self) -> str:
        parts = [self.benchmark, self.model, self.backend, self.mode, self.dtype, self.device,
                 self.metric]
        return " / ".join(part for part in parts if part)


# Runs whose results' times are nearer than this are read as one time range (a commit's
# runs of one night); farther apart (the two ends of a comparison), each in its own.
RUN_SPAN_GAP = timedelta(days=1)


def run_spans(runs: Iterable[Run]) -> list[tuple[list[int], datetime, datetime]]:
    """The runs as groups close in time, each with the bounds of its results' times
    (`Run.timestamp` to `Run.last_timestamp`): (run ids, earliest, latest), oldest first."""
    spans: list[tuple[list[int], datetime, datetime]] = []
    for run in sorted(runs, key=lambda run: run.timestamp):
        if spans and run.timestamp <= spans[-1][2] + RUN_SPAN_GAP:
            ids, start, end = spans[-1]
            ids.append(run.pk)
            spans[-1] = (ids, start, max(end, run.last_timestamp))
        else:
            spans.append(([run.pk], run.timestamp, run.last_timestamp))
    return spans


def stored_times(using: str = "default") -> tuple[datetime | None, datetime | None]:
    """The first and last results' times (two index probes)."""
    found = Result.objects.using(using).aggregate(models.Min("timestamp"),
                                                  models.Max("timestamp"))
    return found["timestamp__min"], found["timestamp__max"]


class ResultQuerySet(models.QuerySet):
    def of_runs(self, runs: Iterable[Run]) -> ResultQuerySet:
        """The results of these runs, read within the times of their results (`run_spans`):
        constants by which PostgreSQL reads only the monthly partitions holding them
        (results.partitions), where by run id alone it probes every month's index."""
        return self.of_spans(run_spans(runs))

    def of_spans(self, spans: list[tuple[list[int], datetime, datetime]]) -> ResultQuerySet:
        """The results of the runs of these spans (`run_spans`), each within its times."""
        if not spans:
            return self.none()
        return self.filter(functools.reduce(operator.or_, (
            models.Q(run_id__in=ids, timestamp__gte=start, timestamp__lte=end)
            for ids, start, end in spans)))

    def stored(self) -> ResultQuerySet:
        """These results, bounded by the first and last stored results' times (`stored_times`):
        constants that on the monthly partitions (results.partitions) leave DEFAULT out
        of a plan, so its months are read in order and a LIMIT stops in the first months
        it needs; with DEFAULT, every month's index scan is begun and merged."""
        first, last = stored_times(self.db)
        if first is None:
            return self.none()
        return self.filter(timestamp__gte=first, timestamp__lte=last)

    def of_run(self, run: Run) -> ResultQuerySet:
        return self.of_runs([run])

    def of_commits(self, repo: str, shas: Iterable[str]) -> ResultQuerySet:
        """The results of some commits of `repo` (any branch), by their runs, read now (the
        (repo, head_sha) index): given the runs' ids and times, the planner reads the results
        by run (the run index) knowing how many there are, in their months only;
        joined to the runs it guessed a few and probed them once per series instead (the
        quantization page at 10M results: 30 ms, against 12)."""
        return self.of_runs(Run.objects.filter(repo=repo, head_sha__in=list(shas))
                            .only("pk", "timestamp", "last_timestamp"))

    def of_commit(self, repo: str, sha: str) -> ResultQuerySet:
        return self.of_commits(repo, [sha])

    def in_slice(self, **series: str | Iterable[str]) -> ResultQuerySet:
        """The results whose series match: `in_slice(benchmark=B, arch=A, metric=[M1, M2])`
        (a list, tuple or set of values matches any of them)."""
        return self.filter(**{
            f"series__{name}__in" if isinstance(value, list | tuple | set | frozenset)
            else f"series__{name}": value for name, value in series.items()})


class Result(models.Model):
    """One record: every repetition, the aggregate charts use, target and string values.

    The foreign keys have no database constraints: ingestion resolves every id inside the
    transaction that inserts the rows, and three constraint probes per row (PostgreSQL
    checks Django's deferred constraints at commit) cost more than the whole COPY of the
    row. Deleting a run, series or upload still deletes its results (through the ORM).
    """

    series = models.ForeignKey(Series, on_delete=models.CASCADE, db_index=False,
                               db_constraint=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, db_index=False, db_constraint=False)
    # its index is a BRIN on PostgreSQL (migration 0017): rows are written an upload at a
    # time, so a summary of each 32 pages' upload ids finds an upload's rows
    upload = models.ForeignKey(Upload, on_delete=models.CASCADE, related_name="results",
                               db_constraint=False)
    timestamp = models.DateTimeField()
    value = models.FloatField(null=True, help_text="median of the repetitions; null if none")
    # Null where it would hold one repetition that is `value`, or none: 21 of a result's
    # 155 bytes in the table (most results have one). Read it as `repetitions`.
    values = FloatListField(default=list, null=True,
                            help_text="metric.benchmark_values, all repetitions; null: "
                                      "[value] (or [] where value is null)")
    target = models.FloatField(null=True, blank=True)
    string_values = models.JSONField(null=True, blank=True)
    extra_info = OrjsonField(null=True, blank=True, help_text="metric.extra_info")
    unknown = models.JSONField(null=True, blank=True, help_text="fields the v3 format lacks")

    objects = ResultQuerySet.as_manager()

    class Meta:
        indexes = [
            # a series over time (trend and regression charts)
            models.Index(fields=["series", "timestamp"]),
            # a run's results (run page, commit comparison). A run holds thousands of
            # results under one key, which the B-tree stores once (deduplication): 7 bytes
            # a result, against 32 for (run, series), which no query needed
            models.Index(fields=["run"]),
            # time-range queries across series; newest first (the query API's order) is
            # this index scanned backwards. Ascending, new rows land at its right end and
            # fill its pages; descending, each new row went to the leftmost page, whose
            # splits left every page half full (56 bytes a result against about 28).
            # On PostgreSQL the primary key is (timestamp, id) and serves instead
            # (migration 0017), which drops this index there
            models.Index(fields=["timestamp", "id"]),
        ]

    def __str__(self) -> str:
        return f"result {self.pk}"

    @property
    def repetitions(self) -> list[float]:
        return repetitions(self.values, self.value)


def repetitions(values: list[float] | None, value: float | None) -> list[float]:
    """A result's repetitions from its stored `values` and `value` (see Result.values)."""
    if values is not None:
        return values
    return [] if value is None else [value]


def stored_values(values: list[float], value: float | None) -> list[float] | None:
    """What Result.values stores of these repetitions and their median `value`: null where
    `repetitions` gives them back (none, or one that is not NaN)."""
    return None if not values or (len(values) == 1 and value is not None) else values


class RunSummary(models.Model):
    """One run's results of one model-less slice (benchmark, mode, dtype, backend, suite,
    device, arch, metric, compile mode), maintained at ingestion.

    Trend charts aggregate these instead of results: a year of nightly runs is a few
    thousand rows, not millions. Geometric means come from `log_sum / log_count`.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, db_constraint=False,
                            related_name="summaries")
    repo = models.CharField(max_length=255)
    branch = models.CharField(max_length=255)
    timestamp = models.DateTimeField()
    benchmark = models.CharField(max_length=255)
    mode = models.CharField(max_length=255)
    dtype = models.CharField(max_length=255)
    backend = models.CharField(max_length=255)
    suite = models.CharField(max_length=255)
    device = models.CharField(max_length=255)
    arch = models.CharField(max_length=255)
    metric = models.CharField(max_length=255)
    compile_mode = models.CharField(max_length=255)
    count = models.PositiveIntegerField(help_text="results with a numeric value")
    log_count = models.PositiveIntegerField(help_text="results with a finite value above 0")
    log_sum = models.FloatField(help_text="sum of ln(value) over those")
    string_count = models.PositiveIntegerField(help_text="results with string values")
    pass_count = models.PositiveIntegerField(help_text="string results that are a pass")

    class Meta:
        constraints = [models.UniqueConstraint(
            fields=["run", "benchmark", "mode", "dtype", "backend", "suite", "device", "arch",
                    "metric", "compile_mode"],
            name="run_summary_group",
        )]
        indexes = [
            # trends (and the recipes page's latest slices): one benchmark, metric, branch
            # and device over a time range, read from the index alone (pytorch/ao's year by
            # day at 10M results: 6,120 rows kept of 16,332 read from ~1,950 heap pages,
            # 13.7 ms; from this index alone 8.2 ms)
            models.Index(fields=["repo", "benchmark", "metric", "branch", "arch", "timestamp"],
                         include=["run", "mode", "dtype", "backend", "suite", "compile_mode",
                                  "log_sum", "log_count", "pass_count", "string_count"],
                         name="run_summary_trend"),
            # the latest runs of a benchmark on a branch (page defaults, pickers)
            models.Index(fields=["repo", "benchmark", "branch", "-timestamp"]),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} {self.benchmark} {self.dtype} {self.metric}"


class SummarySlice(models.Model):
    """A slice of the run summaries (a `RunSummary` group) on one repo and branch, with its
    newest run's time: what the branch, device and mode pickers offer and where the recipes
    page finds each recipe's latest speedup.

    It grows with the slices, not with history (at 10M seeded results: 427 slices against
    139,194 summaries, whose distinct values took 17-38 ms a picker). Ingestion keeps it with
    the summaries (`ingest.summaries`); deleting uploads rebuilds the slices of their repos
    and branches.
    """

    repo = models.CharField(max_length=255)
    branch = models.CharField(max_length=255)
    benchmark = models.CharField(max_length=255)
    mode = models.CharField(max_length=255)
    dtype = models.CharField(max_length=255)
    backend = models.CharField(max_length=255)
    suite = models.CharField(max_length=255)
    device = models.CharField(max_length=255)
    arch = models.CharField(max_length=255)
    metric = models.CharField(max_length=255)
    compile_mode = models.CharField(max_length=255)
    last_at = models.DateTimeField(help_text="the newest run's time with this slice")

    class Meta:
        constraints = [models.UniqueConstraint(
            fields=["repo", "branch", "benchmark", "mode", "dtype", "backend", "suite",
                    "device", "arch", "metric", "compile_mode"],
            name="summary_slice",
        )]

    def __str__(self) -> str:
        return f"{self.repo}@{self.branch} {self.benchmark} {self.dtype} {self.metric}"


class RunBenchmark(models.Model):
    """A run that measured a benchmark on a device (one row per run, benchmark and arch):
    what the commit pickers and page defaults read to find a benchmark's latest commits.

    Finding them in runs (each probed for a summary of the benchmark) cost 15-40 ms at 10M
    seeded results and grew with every night; this index reads about one row per run shown.
    Ingestion keeps it with the summaries (`ingest.summaries`), with the run's commit and
    start time (moved earlier with the run's, `ingest.store`)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, db_constraint=False,
                            related_name="benchmarks")
    repo = models.CharField(max_length=255)
    branch = models.CharField(max_length=255)
    head_sha = models.CharField(max_length=255)
    timestamp = models.DateTimeField(help_text="the run's start")
    benchmark = models.CharField(max_length=255)
    arch = models.CharField(max_length=255)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "benchmark", "arch"],
                                               name="run_benchmark_arch")]
        indexes = [models.Index(fields=["repo", "benchmark", "branch", "-timestamp"]),
                   models.Index(fields=["repo", "benchmark", "branch", "arch", "-timestamp"])]

    def __str__(self) -> str:
        return f"run {self.run_id} {self.benchmark} on {self.arch or '-'}"
