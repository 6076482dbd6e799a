"""Regressions found in result series, their triage history, and what detection and alerts
are configured with (edited in the admin)."""

from __future__ import annotations

import fnmatch

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.urls import reverse
from django.utils import timezone

from benchsite.regressions.detect import changepoint, hud_policy, judge
from benchsite.results.models import Result, Run, Series
from runner.contract.directions import HIGHER, LOWER, Direction, direction
from runner.contract.repos import pattern_problem

DIRECTIONS = [(HIGHER, "higher is better"), (LOWER, "lower is better")]


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
    def is_current(self) -> bool:
        return self.state in self.CURRENT

    @property
    def direction_rule(self) -> str:
        """Why the series' metric is judged the way it is now: an override, the contract's
        table, inference from its name and unit (that of the first bad point), or unknown."""
        unit = (Result.objects.filter(series_id=self.series_id, run_id=self.first_bad_run_id)
                .values_list("extra_info__unit", flat=True).first())
        judged = MetricDirection.judge([self.series], {self.series_id: str(unit or "")})
        return judged[self.series_id].rule

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


class SeriesBaseline(models.Model):
    """A series' baseline on its default branch as of one of its points (`judge.Baseline`:
    level since its latest recorded change, noise, points), written by detection for the
    newest point it looked at and by `manage.py baselines` for older ones. Comparisons
    read it for their base commit instead of the series' history (which costs 60 rows a
    series). A change triaged as a false positive later is not undone here."""

    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    level = models.FloatField(null=True)
    noise = models.FloatField(null=True)
    freedom = models.FloatField()
    points = models.PositiveIntegerField()
    since = models.PositiveIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "series"],
                                               name="one_baseline_per_run_and_series")]

    def __str__(self) -> str:
        return f"baseline of series {self.series_id} at run {self.run_id}"


class MetricDirection(models.Model):
    """Which way is better for a metric, where the contract's table and inference from the
    name and unit (runner.contract.directions) do not tell, or are wrong for this site."""

    metric = models.CharField(max_length=255, help_text="the metric name, exactly")
    benchmark = models.CharField(max_length=255, blank=True,
                                 help_text="only for this benchmark; blank: every benchmark")
    direction = models.CharField(max_length=10, choices=DIRECTIONS)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["metric", "benchmark"],
                                               name="one_direction_per_metric")]

    def __str__(self) -> str:
        where = f" in {self.benchmark}" if self.benchmark else ""
        return f"{self.metric}{where}: {self.get_direction_display()}"

    @classmethod
    def resolve(cls, series: list[Series], units: dict[int, str]) -> dict[int, str | None]:
        """Better direction per series id (HIGHER, LOWER or None: unknown)."""
        return {pk: judged.better for pk, judged in cls.judge(series, units).items()}

    @classmethod
    def judge(cls, series: list[Series], units: dict[int, str]) -> dict[int, Direction]:
        """Direction and its rule per series id: an override for (metric, benchmark), else for
        the metric, else the contract's, from its table or the name and `units[series id]`."""
        overrides = {(row.metric, row.benchmark): row
                     for row in cls.objects.filter(metric__in={s.metric for s in series})}
        judged = {}
        for s in series:
            row = overrides.get((s.metric, s.benchmark)) or overrides.get((s.metric, ""))
            judged[s.pk] = (Direction(row.direction, f"override: {row}") if row is not None
                            else direction(s.metric, s.benchmark, units.get(s.pk) or ""))
        return judged


# (metric pattern, tolerance): the first match applies. From the HUD: speedup 0.95x,
# passrate 0.9x, compile latency 1.15x; memory 20 %. Other latencies and times: 5 %, like
# speedups (a speedup is a ratio of two of them); commit comparisons also require a change
# to stand out of the series' own noise, so a noisy timing is not judged at 5 % alone.
# Instruction counts (callgrind) repeat within a few tenths of a percent, so 1 % is real.
DEFAULT_THRESHOLDS = [("*speedup*", 0.05), ("*pass*rate*", 0.10), ("*compil*", 0.15),
                      ("*latency*", 0.05), ("*time*", 0.05), ("*memory*", 0.20),
                      ("*instruction*", 0.01)]
# Metrics whose change points matter below the global `min_magnitude`.
DEFAULT_CHANGEPOINT_MAGNITUDES = {"*instruction*": 0.01}


class DetectionSettings(models.Model):
    """Detector windows and thresholds, stopped-reporting limits: one row (pk 1), made with
    the default thresholds by the first `load()`."""

    changepoint_enabled = models.BooleanField(default=True)
    history_points = models.PositiveIntegerField(
        default=200, help_text="points of each series' recent history detection reads")
    before = models.PositiveIntegerField(default=changepoint.DEFAULT.before,
                                         help_text="change point: baseline points, at most")
    min_after = models.PositiveIntegerField(
        default=changepoint.DEFAULT.min_after,
        help_text="change point: points at the new level before a change is raised")
    min_magnitude = models.FloatField(
        default=changepoint.DEFAULT.min_magnitude,
        help_text="change point: smallest relative change raised (0.04 = 4 %)")
    significance = models.FloatField(
        default=changepoint.DEFAULT.alpha,
        help_text="change point: two-sided significance level of the test")

    hud_enabled = models.BooleanField(default=True)
    baseline_points = models.PositiveIntegerField(
        default=hud_policy.DEFAULT.baseline, help_text="HUD policy: baseline window")
    comparison_points = models.PositiveIntegerField(
        default=hud_policy.DEFAULT.comparison, help_text="HUD policy: comparison window")
    baseline_statistic = models.CharField(
        max_length=10, default="median", choices=[(s, s) for s in hud_policy.STATISTICS])
    default_tolerance = models.FloatField(
        default=0.05, help_text="HUD policy and commit comparison: relative change beyond "
        "which a point violates / a series changed, where no metric threshold matches")

    default_branches = models.CharField(
        max_length=500, default="main",
        help_text="comma-separated: the branches detection runs on and whose history "
        "comparisons judge noise with, for repos without their own below")
    lookback_points = models.PositiveIntegerField(
        default=60, help_text="commit comparison: default-branch points up to the base "
        "commit that give a series' level and noise")
    min_history = models.PositiveIntegerField(
        default=5, help_text="commit comparison: history points needed to judge the noise")
    compare_significance = models.FloatField(
        default=0.05, help_text="commit comparison: Mann-Whitney U level, used when both "
        "commits have 4+ repetitions")
    compare_fdr = models.FloatField(
        default=judge.Rules.fdr,
        help_text="commit comparison: false discovery rate over a comparison's series "
        f"(0 < q <= {judge.MAX_FDR:g}); lower keeps quiet comparisons of hundreds of series "
        "from failing the gate, higher finds an isolated change more often (a request's "
        "?fdr= or the gate's --fdr overrides it)")

    silence_gaps = models.PositiveIntegerField(
        default=3, help_text="stopped reporting: silent for more than this many usual gaps")
    silence_min_runs = models.PositiveIntegerField(
        default=5, help_text="stopped reporting: runs needed to know the usual gap")
    silence_lookback_days = models.PositiveIntegerField(
        default=30, help_text="stopped reporting: history looked at")

    class Meta:
        verbose_name = verbose_name_plural = "detection settings"

    def __str__(self) -> str:
        return "detection settings"

    def clean(self) -> None:
        try:
            self.changepoint_params()
            hud_policy.Params(self.baseline_points, self.comparison_points,
                              self.default_tolerance, self.baseline_statistic)
        except ValueError as error:
            raise ValidationError(str(error)) from None
        try:
            judge.check_fdr(self.compare_fdr)
        except (TypeError, ValueError) as error:
            raise ValidationError({"compare_fdr": str(error)}) from None

    @classmethod
    def load(cls) -> DetectionSettings:
        found = (cls.objects.prefetch_related("thresholds", "repo_branches")
                 .filter(pk=1).first())
        if found is not None:
            return found
        with transaction.atomic():
            row, created = cls.objects.get_or_create(pk=1)
            if created:
                MetricThreshold.objects.bulk_create(  # 10, 20, ...: room to insert before
                    MetricThreshold(settings=row, position=10 * number, metric=metric,
                                    tolerance=tolerance, changepoint_min_magnitude=(
                                        DEFAULT_CHANGEPOINT_MAGNITUDES.get(metric)))
                    for number, (metric, tolerance) in enumerate(DEFAULT_THRESHOLDS, 1))
        return cls.objects.prefetch_related("thresholds", "repo_branches").get(pk=1)

    def branches_for(self, repo: str) -> list[str]:
        """The default branches of a repo: its own row's (the first pattern that matches),
        else the site's."""
        row = next((row for row in self.repo_branches.all()
                    if fnmatch.fnmatchcase(repo, row.repo)), None)
        return split_branches(row.branches if row else self.default_branches)

    def changepoint_params(self) -> changepoint.Params:
        return changepoint.Params(before=self.before, min_before=min(6, self.before),
                                  min_after=self.min_after,
                                  max_after=max(self.min_after, changepoint.DEFAULT.max_after),
                                  min_magnitude=self.min_magnitude, alpha=self.significance)

    def changepoint_magnitude(self, metric: str, benchmark: str) -> float:
        """The smallest change point raised for this metric: its threshold's, else global."""
        row = self.threshold_for(metric, benchmark)
        if row is not None and row.changepoint_min_magnitude is not None:
            return row.changepoint_min_magnitude
        return self.min_magnitude

    def threshold_for(self, metric: str, benchmark: str) -> MetricThreshold | None:
        """The first threshold (by position) whose patterns match."""
        rows = sorted(self.thresholds.all(), key=lambda row: (row.position, row.pk))
        return next((row for row in rows if row.matches(metric, benchmark)), None)

    def tolerance(self, metric: str, benchmark: str) -> float:
        row = self.threshold_for(metric, benchmark)
        return row.tolerance if row else self.default_tolerance

    def hud_params(self, metric: str, benchmark: str) -> hud_policy.Params:
        row = self.threshold_for(metric, benchmark)
        return hud_policy.Params(
            baseline=self.baseline_points, comparison=self.comparison_points,
            tolerance=row.tolerance if row else self.default_tolerance,
            statistic=(row.statistic if row and row.statistic else self.baseline_statistic))


class MetricThreshold(models.Model):
    """How far a metric may move (HUD policy violations, commit comparison), and optionally
    the smallest change point raised for it."""

    settings = models.ForeignKey(DetectionSettings, on_delete=models.CASCADE,
                                 related_name="thresholds")
    position = models.PositiveIntegerField(default=0, help_text="the first match applies")
    metric = models.CharField(max_length=255,
                              help_text="pattern, case-insensitive: '*speedup*', '*latency*'")
    benchmark = models.CharField(max_length=255, default="*", help_text="pattern")
    tolerance = models.FloatField(help_text="0.05: speedup 0.95x; 0.15: latency 1.15x")
    statistic = models.CharField(max_length=10, blank=True,
                                 choices=[(s, s) for s in hud_policy.STATISTICS],
                                 help_text="HUD baseline statistic; blank: the default")
    changepoint_min_magnitude = models.FloatField(
        null=True, blank=True, help_text="change point: smallest relative change raised for "
        "these metrics (0.01 = 1 %); blank: the global minimum")
    hud_raises = models.BooleanField(
        default=False, help_text="the HUD policy raises regressions of these metrics on its "
        "own; otherwise its verdict is evidence on the change points it agrees with")

    class Meta:
        ordering = ["position", "id"]

    def __str__(self) -> str:
        return f"{self.metric} ({self.benchmark}): {self.tolerance:.0%}"

    def clean(self) -> None:
        if not 0 <= self.tolerance < 1:
            raise ValidationError({"tolerance": "must be at least 0 and less than 1"})
        magnitude = self.changepoint_min_magnitude
        if magnitude is not None and not 0 <= magnitude < 1:
            raise ValidationError(
                {"changepoint_min_magnitude": "must be at least 0 and less than 1"})

    def matches(self, metric: str, benchmark: str) -> bool:
        return (fnmatch.fnmatchcase(metric.lower(), self.metric.lower())
                and fnmatch.fnmatchcase(benchmark.lower(), (self.benchmark or "*").lower()))


def split_branches(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


class RepoBranches(models.Model):
    """A repo's default branches, where they are not the site's (`release/*` repos, `trunk`)."""

    settings = models.ForeignKey(DetectionSettings, on_delete=models.CASCADE,
                                 related_name="repo_branches")
    repo = models.CharField(max_length=255, help_text="pattern: 'pytorch/pytorch', 'meta/*'")
    branches = models.CharField(max_length=500, help_text="comma-separated: 'main, release'")

    class Meta:
        ordering = ["id"]
        verbose_name = verbose_name_plural = "repo default branches"

    def __str__(self) -> str:
        return f"{self.repo}: {self.branches}"

    def clean(self) -> None:
        problems = {}
        if problem := pattern_problem(self.repo):
            problems["repo"] = problem
        if not split_branches(self.branches):
            problems["branches"] = "name at least one branch"
        if problems:
            raise ValidationError(problems)


class NightlyReport(models.Model):
    """Per benchmark and device, for one repo, branch and day (UTC): how many series were
    reported and what detection made of them (the PyTorch HUD's regression report)."""

    repo = models.CharField(max_length=255)
    branch = models.CharField(max_length=255)
    day = models.DateField()
    rows = models.JSONField(default=list, help_text="one per benchmark and device: counts")
    created_at = models.DateTimeField(auto_now=True)
    notified_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-day", "repo", "branch"]
        constraints = [models.UniqueConstraint(fields=["repo", "branch", "day"],
                                               name="one_report_per_day")]

    def __str__(self) -> str:
        return f"{self.repo}@{self.branch} {self.day}"

    def get_absolute_url(self) -> str:
        return reverse("regressions:report", args=[self.pk])


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
