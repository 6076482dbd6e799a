"""Submitting a job: validate the spec, expand it into cells, queue one task per cell."""

from __future__ import annotations

import dataclasses
from typing import Any

import yaml
from django.conf import settings
from django.db import transaction

from benchsite.jobs.models import Job, JobCell
from runner.quant.cells import TimingSettings
from runner.quant.spec import SpecError, parse_spec


class JobRefused(ValueError):
    """The job cannot be submitted; the message says where and why."""


def submit_job(
    spec_yaml: str,
    *,
    name: str,
    queue: str,
    via: str,
    repo: str = "",
    head_branch: str = "",
    head_sha: str = "",
    timing: dict[str, Any] | None = None,
    user=None,
    token=None,
) -> Job:
    """Create the job and its cells; their tasks are queued once the transaction commits."""
    if queue not in settings.BENCH_QUEUES:
        raise JobRefused(f"queue {queue!r}: unknown; the queues are {settings.BENCH_QUEUES} "
                         "(setting BENCH_QUEUES)")
    try:
        spec = parse_spec(yaml.safe_load(spec_yaml), source=name)
    except yaml.YAMLError as error:
        raise JobRefused(f"{name}: not valid YAML: {error}") from None
    except SpecError as error:
        raise JobRefused(str(error)) from None
    timing = timing or {}
    known = {field.name for field in dataclasses.fields(TimingSettings)}
    unknown = sorted(set(timing) - known)
    if unknown:
        raise JobRefused(f"timing: unknown settings {unknown}; known: {sorted(known)}")
    try:
        TimingSettings(**timing)
    except TypeError as error:
        raise JobRefused(f"timing: {error}") from None
    cells = spec.cells()
    if not cells:
        raise JobRefused(f"{name}: the spec expands to no cells")

    with transaction.atomic():
        job = Job.objects.create(
            name=name, spec_yaml=spec_yaml, queue=queue, submitted_via=via,
            submitted_by=user, submitted_token=token, timing=timing,
            repo=repo or settings.BENCH_JOB_REPO, head_branch=head_branch or "main",
            head_sha=head_sha, cells_total=len(cells),
        )
        if not head_sha:
            job.head_sha = f"job-{job.pk}"
            job.save(update_fields=["head_sha"])
        JobCell.objects.bulk_create(
            JobCell(job=job, index=index, key=cell.key, cell=cell.to_dict())
            for index, cell in enumerate(cells)
        )
        transaction.on_commit(lambda: enqueue(job))
    return job


def enqueue(job: Job) -> None:
    from benchsite.jobs.tasks import run_cell

    for cell_id in job.cells.values_list("id", flat=True):
        run_cell.apply_async(args=[cell_id], queue=job.queue)
