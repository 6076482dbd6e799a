"""Cron schedules (django-celery-beat) that submit a spec file or a benchmark config as a job
(benchsite.catalog.tasks.submit_scheduled)."""

from __future__ import annotations

import json

from django_celery_beat.models import CrontabSchedule, PeriodicTask

TASK = "benchsite.catalog.tasks.submit_scheduled"
NIGHTLY = "0 3 * * *"


def schedule(name: str, cron: str, **kwargs):
    """Create or update the PeriodicTask `name`: submit_scheduled(**kwargs) at `cron` (UTC).

    Returns (task, created); ValueError when `cron` is not five fields."""
    fields = cron.split()
    if len(fields) != 5:
        raise ValueError(f"cron {cron!r}: expected five fields, e.g. '{NIGHTLY}' "
                         "(minute hour day-of-month month day-of-week)")
    minute, hour, day_of_month, month_of_year, day_of_week = fields
    crontab, _ = CrontabSchedule.objects.get_or_create(
        minute=minute, hour=hour, day_of_month=day_of_month, month_of_year=month_of_year,
        day_of_week=day_of_week, timezone="UTC")
    return PeriodicTask.objects.update_or_create(
        name=name, defaults={"task": TASK, "crontab": crontab, "kwargs": json.dumps(kwargs)})


def schedules_of(**kwargs):
    """The schedules whose task arguments include all of `kwargs`."""
    found = []
    for task in PeriodicTask.objects.filter(task=TASK).select_related("crontab"):
        try:
            arguments = json.loads(task.kwargs or "{}")
        except ValueError:
            continue
        if all(arguments.get(key) == value for key, value in kwargs.items()):
            found.append(task)
    return found
