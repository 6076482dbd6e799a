"""Triage precision: how many of the alerts raised in a window were real, by what people
decided about them, per detector and per benchmark (issue 33: "know why a number moved").

The alerts are the records of the kinds that are notified (regression, change; an
improvement is no alert) raised in the window (by their `detected_at`, else their creation
time). Their labels:

- valid: acknowledged, fixed or expected (a real change; expected is real but intended);
- invalid: a false positive, or still open when its A/B try job did not reproduce it;
- unlabelled: open otherwise.

Precision is valid / (valid + invalid), with the number of labels behind it and a 95 %
Wilson interval, so that 2 of 3 is not read like 200 of 300. The "confirmation" row scores
the A/B confirmation itself: of the records it confirmed that people labelled, the share
valid (its own "not reproduced" verdict never scores it).

A benchmark with at least `precision_min_labels` labels and a precision under
`precision_floor` is listed with, per metric threshold, the smallest round threshold that
would have avoided its invalid alerts and how many valid ones it would have missed.

Counting is one aggregate query over the window's records (grouped by detector and
benchmark); the suggestions read the labelled records of the benchmarks under the floor
only."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count, Q, QuerySet
from django.utils import timezone
from scipy import stats

from benchsite.regressions.models import DetectionSettings, Detector, Regression

State, Confirmation = Regression.State, Regression.Confirmation
VALID_STATES = (State.ACKNOWLEDGED, State.FIXED, State.EXPECTED)
VALID = Q(state__in=VALID_STATES)
INVALID = Q(state=State.FALSE_POSITIVE) | Q(state=State.OPEN,
                                            confirmation=Confirmation.NOT_REPRODUCED)
UNLABELLED = Q(state=State.OPEN) & ~Q(confirmation=Confirmation.NOT_REPRODUCED)
CONFIRMED = Q(confirmation=Confirmation.CONFIRMED)
CONFIRMATION = "confirmation"
MAX_DAYS = 3650
CONFIDENCE = 0.95
STEP = 0.005  # suggested thresholds are multiples of half a percent
# Detectors whose magnitude is a relative change a threshold applies to (accuracy and
# missing-metric records carry -1).
THRESHOLDED = {Detector.CHANGEPOINT: "changepoint_magnitude", Detector.HUD_POLICY: "tolerance"}


@dataclass(frozen=True)
class Score:
    valid: int = 0
    invalid: int = 0
    unlabelled: int = 0

    def __add__(self, other: Score) -> Score:
        return Score(self.valid + other.valid, self.invalid + other.invalid,
                     self.unlabelled + other.unlabelled)

    @property
    def labels(self) -> int:
        return self.valid + self.invalid

    @property
    def precision(self) -> float | None:
        return self.valid / self.labels if self.labels else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return wilson(self.valid, self.labels)

    @property
    def text(self) -> str:
        """'80 % (49–94 %)', or '—' without labels."""
        if self.precision is None:
            return "—"
        low, high = self.interval
        return f"{self.precision:.0%} ({low * 100:.0f}–{high:.0%})".replace("%", " %")

    def as_json(self) -> dict:
        low, high = self.interval or (None, None)
        return {"labels": self.labels, "valid": self.valid, "invalid": self.invalid,
                "unlabelled": self.unlabelled, "precision": self.precision, "low": low,
                "high": high}


def wilson(successes: int, n: int) -> tuple[float, float] | None:
    """The 95 % Wilson score interval of a proportion (None without trials): unlike p ± z·se
    it stays within [0, 1] and is wide for a few trials, even at 0 or n successes."""
    if n == 0:
        return None
    interval = stats.binomtest(successes, n).proportion_ci(CONFIDENCE, method="wilson")
    return float(interval.low), float(interval.high)


def percent(value: float) -> str:
    """0.07 -> '7 %', 0.075 -> '7.5 %'."""
    return f"{round(value * 100, 1):g} %"


@dataclass
class Suggestion:
    """A threshold for a benchmark's metrics (those a threshold pattern, or else one metric's
    name, covers) above all their invalid alerts."""

    repo: str
    benchmark: str
    metric: str  # the pattern of the threshold in force, or the metric's name
    threshold: float
    current: dict[str, float]  # detector -> its threshold in force
    avoided: int
    missed: int

    @property
    def text(self) -> str:
        now = ", ".join(f"{Detector(name).label} {percent(value)}" if len(self.current) > 1
                        else percent(value) for name, value in self.current.items())
        return (f"a threshold of {percent(self.threshold)} for {self.benchmark} "
                f"({self.metric}, now {now}) would have avoided "
                f"{plural(self.avoided, 'invalid alert')} and missed "
                f"{plural(self.missed, 'valid one')}")

    def as_json(self) -> dict:
        return {"metric": self.metric, "threshold": self.threshold, "current": self.current,
                "avoided": self.avoided, "missed": self.missed, "text": self.text}


def plural(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


@dataclass
class Precision:
    days: int
    start: datetime
    end: datetime
    detectors: dict[str, Score]  # every detector, then CONFIRMATION
    benchmarks: dict[tuple[str, str], Score]  # (repo, benchmark)
    floor: float
    min_labels: int
    suggestions: dict[tuple[str, str], list[Suggestion]] = field(default_factory=dict)

    @property
    def floor_text(self) -> str:
        return percent(self.floor)

    @property
    def below_floor(self) -> list[tuple[str, str]]:
        """Benchmarks with enough labels and a precision under the floor."""
        return [key for key, score in self.benchmarks.items()
                if score.labels >= max(1, self.min_labels) and score.precision < self.floor]

    def detector_rows(self) -> list[dict]:
        return [{"detector": name, "label": detector_label(name), "score": score}
                for name, score in self.detectors.items()]

    def floor_rows(self) -> list[dict]:
        return [{"repo": repo, "benchmark": benchmark, "score": self.benchmarks[repo, benchmark],
                 "suggestions": self.suggestions.get((repo, benchmark), [])}
                for repo, benchmark in self.below_floor]

    def as_json(self, benchmarks: bool = True) -> dict:
        data = {"days": self.days, "start": self.start.isoformat(),
                "end": self.end.isoformat(), "floor": self.floor,
                "min_labels": self.min_labels,
                "detectors": [{"detector": row["detector"], "label": row["label"],
                               **row["score"].as_json()} for row in self.detector_rows()]}
        if benchmarks:
            data["benchmarks"] = [{"repo": repo, "benchmark": benchmark, **score.as_json()}
                                  for (repo, benchmark), score in self.benchmarks.items()]
        data["below_floor"] = [
            {"repo": row["repo"], "benchmark": row["benchmark"], **row["score"].as_json(),
             "suggestions": [s.as_json() for s in row["suggestions"]]}
            for row in self.floor_rows()]
        return data


def detector_label(name: str) -> str:
    return "confirmation (confirmed)" if name == CONFIRMATION else Detector(name).label


def alerts(start: datetime, end: datetime, repo: str | None = None,
           branch: str | None = None) -> QuerySet[Regression]:
    """The alerts raised in [start, end)."""
    found = Regression.objects.filter(kind__in=Regression.NOTIFIED_KINDS).filter(
        Q(detected_at__gte=start, detected_at__lt=end)
        | Q(detected_at__isnull=True, created_at__gte=start, created_at__lt=end))
    if repo is not None:
        found = found.filter(series__repo=repo)
    if branch is not None:
        found = found.filter(branch=branch)
    return found


def triage_precision(settings: DetectionSettings | None = None, days: int | None = None,
                     end: datetime | None = None, repo: str | None = None,
                     branch: str | None = None) -> Precision:
    """The precision of the alerts raised in the `days` (default the settings') up to `end`
    (default now), of `repo` and `branch` where given."""
    settings = settings or DetectionSettings.load()
    days = days or settings.precision_days
    end = end or timezone.now()
    start = end - timedelta(days=days)
    found = alerts(start, end, repo, branch)
    counts = (found.order_by().values("detector", "series__repo", "series__benchmark")
              .annotate(valid=Count("pk", filter=VALID), invalid=Count("pk", filter=INVALID),
                        unlabelled=Count("pk", filter=UNLABELLED),
                        confirmed_valid=Count("pk", filter=CONFIRMED & VALID),
                        confirmed_invalid=Count("pk", filter=CONFIRMED & INVALID),
                        confirmed_unlabelled=Count("pk", filter=CONFIRMED & UNLABELLED)))
    detectors = dict.fromkeys([*Detector.values, CONFIRMATION], Score())
    benchmarks: defaultdict[tuple[str, str], Score] = defaultdict(Score)
    for row in counts:
        score = Score(row["valid"], row["invalid"], row["unlabelled"])
        detectors[row["detector"]] = detectors.get(row["detector"], Score()) + score
        detectors[CONFIRMATION] += Score(row["confirmed_valid"], row["confirmed_invalid"],
                                         row["confirmed_unlabelled"])
        benchmarks[row["series__repo"], row["series__benchmark"]] += score
    precision = Precision(days, start, end, detectors, dict(sorted(benchmarks.items())),
                          settings.precision_floor, settings.precision_min_labels)
    if precision.below_floor:
        precision.suggestions = suggest(found, precision.below_floor, settings)
    return precision


def suggest(found: QuerySet[Regression], benchmarks: list[tuple[str, str]],
            settings: DetectionSettings) -> dict[tuple[str, str], list[Suggestion]]:
    """Per benchmark, a threshold per metric pattern above its invalid alerts' magnitudes,
    where that raises the threshold in force: one query for their labelled alerts."""
    wanted = set(benchmarks)
    labelled = (found.filter(detector__in=list(THRESHOLDED), series__benchmark__in={
        benchmark for _, benchmark in wanted}).filter(VALID | INVALID).order_by()
        .values_list("series__repo", "series__benchmark", "series__metric", "detector",
                     "magnitude", "state"))
    patterns: dict[tuple[str, str], str] = {}  # (metric, benchmark) -> its threshold's
    # (repo, benchmark, pattern) -> [(metric, detector, |magnitude|, valid)]
    groups: defaultdict[tuple[str, str, str], list] = defaultdict(list)
    for repo, benchmark, metric, detector, magnitude, state in labelled:
        if (repo, benchmark) not in wanted:
            continue
        if (metric, benchmark) not in patterns:
            row = settings.threshold_for(metric, benchmark)
            patterns[metric, benchmark] = row.metric if row else metric
        groups[repo, benchmark, patterns[metric, benchmark]].append(
            (metric, detector, abs(magnitude), state in VALID_STATES))
    suggestions: defaultdict[tuple[str, str], list[Suggestion]] = defaultdict(list)
    for (repo, benchmark, pattern), labels in sorted(groups.items()):
        suggestion = _suggestion(repo, benchmark, pattern, labels, settings)
        if suggestion is not None:
            suggestions[repo, benchmark].append(suggestion)
    return dict(suggestions)


def _suggestion(repo: str, benchmark: str, pattern: str, labels: list,
                settings: DetectionSettings) -> Suggestion | None:
    invalid = [(metric, detector, size) for metric, detector, size, valid in labels
               if not valid]
    if not invalid:
        return None
    threshold = step_above(max(size for _, _, size in invalid))
    metric = invalid[0][0]  # the metrics of one pattern share its thresholds
    current = {detector: getattr(settings, THRESHOLDED[detector])(metric, benchmark)
               for detector in sorted({detector for _, detector, _ in invalid})}
    if threshold <= min(current.values()):
        return None  # smaller than the threshold in force already: it did not avoid them
    missed = sum(1 for _, _, size, valid in labels if valid and size <= threshold)
    return Suggestion(repo, benchmark, pattern, threshold, current, len(invalid), missed)


def step_above(size: float) -> float:
    """The smallest multiple of STEP strictly above `size`: 0.068 -> 0.07, 0.07 -> 0.075."""
    return round((math.floor(round(size / STEP, 6)) + 1) * STEP, 4)


def parse_days(raw: str) -> int:
    """A window from a URL: a positive whole number of days up to MAX_DAYS."""
    if not re.fullmatch(r"[0-9]{1,9}", raw) or not 1 <= int(raw) <= MAX_DAYS:
        raise ValueError(f"{raw!r} is not a whole number of days from 1 to {MAX_DAYS}")
    return int(raw)
