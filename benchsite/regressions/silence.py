"""Stopped reporting: devices and series that reported regularly and went silent.

A device (repo, device, arch of its runs) is silent when no run has come for more than
`silence_gaps` times its usual gap (the median gap between its runs over the lookback); a
series of a device that still reports is silent when it has not had a result for that many
of its own usual gaps (its mean gap: first to last result over their count). Each silence is
one alert, raised once (keyed by its last result); it is resolved when results come again.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from datetime import datetime, timedelta
from statistics import median

from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Min
from django.utils import timezone

from benchsite.regressions.models import DetectionSettings, SilenceAlert
from benchsite.results.models import Result, Run

# Shorter gaps than this are one burst of runs (retries, several jobs of one night).
MIN_GAP = timedelta(minutes=30)


def check_stopped_reporting(now: datetime | None = None,
                            settings: DetectionSettings | None = None) -> list[SilenceAlert]:
    """Raise alerts for new silences and resolve those that ended; returns the new ones."""
    now = now or timezone.now()
    settings = settings or DetectionSettings.load()
    since = now - timedelta(days=settings.silence_lookback_days)
    runs: defaultdict[tuple[str, str, str], list[datetime]] = defaultdict(list)
    for repo, device, arch, when in (Run.objects.filter(timestamp__gte=since, timestamp__lte=now)
                                     .order_by("timestamp")
                                     .values_list("repo", "device", "arch", "timestamp")):
        runs[repo, device, arch].append(when)

    silent: list[SilenceAlert] = []
    reporting = set()
    for (repo, device, arch), times in runs.items():
        gap = _usual_gap(times)
        if gap is None or len(times) < settings.silence_min_runs:
            continue
        if now - times[-1] > settings.silence_gaps * gap:
            silent.append(SilenceAlert(key=_key(repo, device, arch), repo=repo, device=device,
                                       arch=arch, last_seen=times[-1], usual_gap=gap,
                                       runs_seen=len(times)))
        else:
            reporting.add((repo, device, arch))

    per_series = (Result.objects.filter(timestamp__gte=since, timestamp__lte=now)
                  .values("series_id", "series__repo", "series__device", "series__arch")
                  .annotate(first=Min("timestamp"), last=Max("timestamp"), count=Count("id")))
    for row in per_series:
        device_key = (row["series__repo"], row["series__device"], row["series__arch"])
        if device_key not in reporting or row["count"] < settings.silence_min_runs:
            continue
        gap = max((row["last"] - row["first"]) / (row["count"] - 1), MIN_GAP)
        device_runs = runs[device_key]
        runs_since = len(device_runs) - bisect_right(device_runs, row["last"])
        # Silent for longer than its gaps allow, while its device ran several times.
        if now - row["last"] > settings.silence_gaps * gap and \
                runs_since >= settings.silence_gaps:
            silent.append(SilenceAlert(
                key=_key(*device_key, series=row["series_id"]), repo=device_key[0],
                device=device_key[1], arch=device_key[2], series_id=row["series_id"],
                last_seen=row["last"], usual_gap=gap, runs_seen=row["count"]))

    _resolve_ended(runs, now)
    return [alert for alert in silent if _raise(alert)]


def _usual_gap(times: list[datetime]) -> timedelta | None:
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)
            if later - earlier >= MIN_GAP]
    return median(gaps) if gaps else None


def _key(repo: str, device: str, arch: str, series: int | None = None) -> str:
    return "\x1f".join((repo, device, arch, str(series or "")))


def _raise(alert: SilenceAlert) -> bool:
    if SilenceAlert.objects.filter(key=alert.key, last_seen=alert.last_seen).exists():
        return False
    try:
        with transaction.atomic():
            alert.save()
    except IntegrityError:  # a concurrent check raised it first
        return False
    return True


def _resolve_ended(runs: dict[tuple[str, str, str], list[datetime]], now: datetime) -> None:
    """Resolve active alerts whose device or series has reported since their last result."""
    active = list(SilenceAlert.objects.filter(resolved_at__isnull=True))
    silent = [alert for alert in active if alert.series_id]
    # Only results after the earliest last seen matter: on PostgreSQL, recent months only.
    latest = dict(Result.objects.filter(
        series_id__in=[alert.series_id for alert in silent],
        timestamp__gt=min((alert.last_seen for alert in silent), default=now))
        .values_list("series_id").annotate(Max("timestamp")))
    for alert in active:
        if alert.series_id is None:
            times = runs.get((alert.repo, alert.device, alert.arch), [])
            back = bool(times) and times[-1] > alert.last_seen
        else:
            back = latest.get(alert.series_id, alert.last_seen) > alert.last_seen
        if back:
            SilenceAlert.objects.filter(pk=alert.pk, resolved_at__isnull=True).update(
                resolved_at=now)
