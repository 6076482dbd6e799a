"""What detection and commit comparisons are configured with (edited in the admin): the
detectors' windows and thresholds, per-metric thresholds, repos' default branches."""

from __future__ import annotations

import fnmatch
import functools

from django.core.exceptions import ValidationError
from django.db import models, transaction

from benchsite.comparison import judge
from benchsite.regressions.detect import changepoint, hud_policy
from runner.contract.repos import pattern_problem

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


class ConfirmMode(models.TextChoices):
    WAIT = "wait", "wait: notify once confirmed (or at the time limit, unconfirmed)"
    AT_ONCE = "at_once", "notify at once, confirm beside"
    OFF = "off", "off: no confirmation"


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

    confirm_mode = models.CharField(
        max_length=10, choices=ConfirmMode.choices, default=ConfirmMode.WAIT,
        help_text="regressions of series a job measured: an A/B try job of its cell at the "
        "last good and first bad commits confirms them; their notification (and nightly "
        "report) waits for it, or not; a not reproduced one is marked false positive")
    confirm_time_limit_minutes = models.PositiveIntegerField(
        default=180, help_text="wait: a regression still unconfirmed after this long is "
        "notified as 'unconfirmed'")
    confirm_auto_bisect = models.BooleanField(
        default=False, help_text="a confirmed regression starts its bisect; wait: its "
        "notification waits for the culprit too (within the time limit)")

    notify_environment_changes = models.BooleanField(
        default=False, help_text="notify regressions whose change coincides with a change of "
        "the runs' environment (a new torch nightly, driver, CUDA, card...); off: they are "
        "told in the nightly report's own category and on the pages, not sent at once")
    precision_days = models.PositiveIntegerField(
        default=90, help_text="triage precision: the regressions raised in this many days "
        "are scored by their triage (the regressions page's default window)")
    precision_floor = models.FloatField(
        default=0.7, help_text="triage precision: a benchmark below this share of valid "
        "alerts is listed with the threshold that would have avoided its invalid ones")
    precision_min_labels = models.PositiveIntegerField(
        default=5, help_text="triage precision: labels a benchmark needs before it is "
        "judged against the floor")

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
        """The first threshold (by position) whose patterns match; each (metric,
        benchmark)'s answered once for this object's life, as its thresholds are read once
        (`load`): detection asks three times a series, 0.1 ms a time matching patterns."""
        key = metric, benchmark
        found = self._thresholds_found
        if key not in found:
            rows = sorted(self.thresholds.all(), key=lambda row: (row.position, row.pk))
            found[key] = next((row for row in rows if row.matches(metric, benchmark)), None)
        return found[key]

    @functools.cached_property
    def _thresholds_found(self) -> dict[tuple[str, str], MetricThreshold | None]:
        return {}

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
