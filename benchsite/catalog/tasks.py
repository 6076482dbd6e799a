"""Celery tasks of the catalog: what a schedule (django-celery-beat) runs."""

from __future__ import annotations

from pathlib import Path

from celery import shared_task
from django.conf import settings

from benchsite.catalog.run import submit_source
from benchsite.jobs.models import Job


@shared_task
def submit_scheduled(path: str = "", queue: str = "cpu", config: str = "", **metadata) -> int:
    """Submit the spec file at `path` (relative: to the project root) or the benchmark config
    named `config` as a job; the job's id."""
    spec = Path(settings.BASE_DIR) / path if path else None
    return submit_source(spec=spec, config=config, queue=queue, via=Job.Via.SCHEDULE,
                         **metadata).pk
