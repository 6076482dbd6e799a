"""What comparisons read besides results: the admin's metric directions and the stored
series baselines. Both tables were made by the regressions app and keep its names."""

from __future__ import annotations

from django.db import models

from benchsite.results.models import Run, Series
from runner.contract.directions import HIGHER, LOWER

DIRECTIONS = [(HIGHER, "higher is better"), (LOWER, "lower is better")]


class SeriesBaseline(models.Model):
    """A series' baseline on its default branch as of one of its points (`judge.Baseline`:
    level since its latest recorded change, noise, points), written by detection for the
    newest point it looked at and by `manage.py baselines` for older ones. Comparisons
    read it for their base commit instead of the series' history (which costs 60 rows a
    series). A change triaged as a false positive later is not undone here."""

    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="+")
    # found by run through the unique (run, series) index: an index of its own cost 8 bytes
    # a baseline, about one a result
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+", db_index=False)
    level = models.FloatField(null=True)
    noise = models.FloatField(null=True)
    freedom = models.FloatField()
    points = models.PositiveIntegerField()
    since = models.PositiveIntegerField()

    class Meta:
        db_table = "regressions_seriesbaseline"
        constraints = [models.UniqueConstraint(fields=["run", "series"],
                                               name="one_baseline_per_run_and_series")]

    def __str__(self) -> str:
        return f"baseline of series {self.series_id} at run {self.run_id}"


class MetricDirection(models.Model):
    """Which way is better for a metric, where the contract's table and inference from the
    name and unit (runner.contract.directions) do not tell, or are wrong for this site.
    Read through `benchsite.comparison.directions`, never directly."""

    metric = models.CharField(max_length=255, help_text="the metric name, exactly")
    benchmark = models.CharField(max_length=255, blank=True,
                                 help_text="only for this benchmark; blank: every benchmark")
    direction = models.CharField(max_length=10, choices=DIRECTIONS)

    class Meta:
        db_table = "regressions_metricdirection"
        constraints = [models.UniqueConstraint(fields=["metric", "benchmark"],
                                               name="one_direction_per_metric")]

    def __str__(self) -> str:
        where = f" in {self.benchmark}" if self.benchmark else ""
        return f"{self.metric}{where}: {self.get_direction_display()}"
