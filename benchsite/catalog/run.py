"""Running a benchmark config or a spec file: a config is validated against the catalog as
it is now and its plan handed to the one job path (benchsite.jobs.submit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchsite.catalog.configs import check_config
from benchsite.catalog.models import BenchmarkConfig
from benchsite.jobs.models import Job
from benchsite.jobs.submit import JobRefused, submit_job, submit_plan
from runner.engine.specs import SpecError


def run_config(config: BenchmarkConfig, *, queue: str, via: str, user=None,
               **metadata: Any) -> Job:
    """Submit the config as a job on `queue`; JobRefused says why it cannot run."""
    try:
        checked = check_config(config.spec_yaml, config.name)
    except SpecError as error:
        raise JobRefused(str(error)) from None
    return submit_plan(checked.plan, name=config.name, queue=queue, via=via,
                       timing=config.timing, user=user, config=config, **metadata)


def submit_source(*, spec: Path | None = None, config: str = "",
                  timing: dict[str, Any] | None = None, **options: Any) -> Job:
    """Submit the spec file `spec`, or the benchmark config named `config` (which has its
    own timing), with run_config's options; JobRefused says why not."""
    if config:
        if timing:
            raise JobRefused(f"config {config!r}: its timing is set in the admin")
        try:
            found = BenchmarkConfig.objects.get(name=config)
        except BenchmarkConfig.DoesNotExist:
            raise JobRefused(f"benchmark config {config!r}: no such config") from None
        return run_config(found, **options)
    if spec is None:
        raise JobRefused("give a spec file or the name of a benchmark config")
    try:
        text = spec.read_text()
    except OSError as error:
        raise JobRefused(f"{spec}: {error.strerror or error}") from None
    return submit_job(text, name=spec.name, timing=timing, **options)
