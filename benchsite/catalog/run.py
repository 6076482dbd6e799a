"""Running a benchmark config: validated against the catalog as it is now, then submitted
through the one job path (benchsite.jobs.submit.submit_job) with its self-contained spec."""

from __future__ import annotations

from benchsite.catalog.configs import check_config
from benchsite.catalog.models import BenchmarkConfig
from benchsite.jobs.models import Job
from benchsite.jobs.submit import JobRefused, submit_job
from runner.specs import SpecError


def run_config(config: BenchmarkConfig, *, queue: str, via: str, user=None,
               **metadata) -> Job:
    """Submit the config as a job on `queue`; JobRefused says why it cannot run."""
    try:
        checked = check_config(config.spec_yaml, config.name)
    except SpecError as error:
        raise JobRefused(str(error)) from None
    return submit_job(checked.spec_yaml, name=config.name, queue=queue, via=via,
                      timing=config.timing, user=user, config=config, **metadata)


def run_config_named(name: str, **options) -> Job:
    try:
        config = BenchmarkConfig.objects.get(name=name)
    except BenchmarkConfig.DoesNotExist:
        raise JobRefused(f"benchmark config {name!r}: no such config") from None
    return run_config(config, **options)
