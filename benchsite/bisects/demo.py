"""`manage.py bench demo-bisect`: the bisection demo from a regression to its culprit, on
this machine, with nothing synthetic in between.

1. The demo repository (runner.sources.demo: 25 commits, a build broken at BROKEN and
   BROKEN + 1, the model SLOWDOWN times slower from SLOW) at FOLDER/repo, its spec at
   FOLDER/demo.yml.
2. The source `demo` for it (repo `demo/pkg`, command mode with the demo's build, package
   `demopkg`: job specs may name its code while it exists).
3. The demo spec as a nightly job on each of NIGHTS: a commit landed every other night up to
   BROKEN - 1 (each measured on two nights), then the nightlies stopped for a week while
   commits BROKEN to SLOW + 1 landed, and ran again from SLOW + 2. (The change-point
   detector wants about twenty points of the old level to raise a change of a few points
   on a busy machine.) Each job's cells run at its commit (checked out and built as the
   source builds it, run in a subprocess like a bisect's steps) and are stored as that
   job's, as a worker stores a cell's, on `main` of `demo/pkg`. Regression detection raises
   the slowdown between the last commit before the week and the first after it, and an A/B
   try job of its cell at those two commits confirms it (DetectionSettings.confirm_mode).
4. The regression and the command that bisects it; with --bisect, the bisect itself, as
   `bench bisect --regression N --wait` runs it.

Run again, it reuses the repository, the source and the jobs already measured.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from statistics import median

import orjson
from django.conf import settings
from django.core.management.base import CommandError
from django.db import transaction
from django.utils import timezone

from benchsite.bisects.models import Source
from benchsite.jobs import tasks as job_tasks
from benchsite.jobs.models import Job, JobCell
from benchsite.jobs.submit import plan_spec
from benchsite.regressions.models import Regression
from benchsite.results.ingest import store_upload
from benchsite.results.models import Result, Upload, repetitions
from runner.sources import demo
from runner.sources.builds import BuildFailed
from runner.sources.commit import RunFailed, run_cells

SOURCE = "demo"
REPO = "demo/pkg"
SPEC_NAME = "demo.yml"
NIGHTS = (*(n for n in range(demo.BROKEN) for _ in range(2)),
          *range(demo.SLOW + 2, demo.SLOW + 6))  # the commit each night measures
DETECTION_WAIT_S = 300  # for detection on the control worker, with a broker


def prepare(folder: Path, out, queue: str = "cpu") -> Regression:
    """Steps 1-3; the regression of the demo's metric that the nightly jobs raised."""
    shas = repository(folder / "repo", out)
    (folder / SPEC_NAME).write_text(demo.SPEC)
    source, _ = Source.objects.update_or_create(name=SOURCE, defaults={
        "location": str((folder / "repo").resolve()), "repo": REPO, "mode": Source.Mode.COMMAND,
        "build_command": demo.BUILD_COMMAND, "pythonpath": ".", "modules": "demopkg"})
    out.write(f"source {source.name!r}: {source.location} ({source.get_mode_display()}), "
              f"repo {REPO}")
    measured: dict[str, int] = {}
    for night, number in enumerate(NIGHTS):
        nightly(source, shas[number], night, number, measured, queue, out)
    return regression_of(shas, out)


def repository(path: Path, out) -> list[str]:
    """The demo repository at `path` (made unless it is there): its shas, oldest first."""
    if not path.exists():
        shas = demo.make(path)
        out.write(f"demo repository: {path} ({len(shas)} commits)")
        return shas
    shas = shas_of(path)
    if len(shas) != demo.COMMITS:
        raise CommandError(f"{path}: not the demo repository ({len(shas)} commits on main, "
                           f"not {demo.COMMITS}); give another --folder, or remove it")
    out.write(f"demo repository: {path} (there already)")
    return shas


def shas_of(path: Path) -> list[str]:
    """The commits of `main` of the repository at `path`, oldest first (none: no such)."""
    return subprocess.run(["git", "-C", str(path), "rev-list", "--reverse", "main"],
                          capture_output=True, text=True).stdout.split()


def nightly(source: Source, sha: str, night: int, number: int, measured: dict[str, int],
            queue: str, out) -> Job:
    """The demo spec's job at one commit, its cells run at that commit on this machine;
    `measured`: the nights so far of each commit (a job made by an earlier run is reused)."""
    where = f"night {night}: commit {number} {sha[:12]}"
    done = list(Job.objects.filter(repo=REPO, head_sha=sha, name=SPEC_NAME,
                                   status=Job.Status.SUCCEEDED).order_by("pk"))
    measured[sha] = measured.get(sha, 0) + 1
    if len(done) >= measured[sha]:
        out.write(f"{where}: job {done[measured[sha] - 1].pk} (measured already)")
        return done[measured[sha] - 1]
    plan = plan_spec(demo.SPEC, SPEC_NAME)
    with transaction.atomic():
        job = Job.objects.create(
            name=SPEC_NAME, family=plan.family.NAME, spec_yaml=demo.SPEC, queue=queue,
            submitted_via=Job.Via.COMMAND, repo=REPO, head_branch="main", head_sha=sha,
            cells_total=len(plan.cells), enqueued_at=timezone.now())  # run here, not sent
        JobCell.objects.bulk_create(JobCell(job=job, index=index, key=cell.key, cell=cell.cell)
                                    for index, cell in enumerate(plan.cells))
    worker = f"demo-bisect pid {os.getpid()}"
    try:
        built = source.workspace().build(sha)
    except BuildFailed as error:
        raise CommandError(f"{where}: does not build: {error.reason}\n{error.log_tail}") from None
    for pending in job.cells.all():
        cell = job_tasks.claim(pending.pk, worker=worker)
        if cell is None:
            continue
        try:
            [run] = run_cells(built, job.family, [{"key": cell.key, "cell": cell.cell}],
                              job.timing, timeout_s=600, files=cell.files)
        except RunFailed as error:
            job_tasks.finish(cell, JobCell.Status.FAILED, error=f"{error.reason}\n"
                                                                 f"{error.output_tail}")
            continue
        with transaction.atomic():
            stored = store_upload(orjson.dumps(run.records), metadata=job.run_metadata(),
                                  source=Upload.Source.WORKER,
                                  idempotency_key=f"job-{job.pk}-cell-{cell.pk}")
            job_tasks.finish(cell, job_tasks.CELL_STATUS[run.status], error=run.error,
                             upload=stored.upload)
    job.refresh_from_db()
    if job.status != Job.Status.SUCCEEDED:
        errors = "; ".join(job.cells.exclude(error="").values_list("error", flat=True))
        raise CommandError(f"{where}: job {job.pk} {job.status}: {errors[-2000:]}")
    values = [v for each in Result.objects.filter(run__in=job.runs(), series__metric=demo.METRIC)
              .values_list("values", "value") for v in repetitions(*each)]
    out.write(f"{where}: job {job.pk}, {demo.METRIC} median "
              f"{median(values) if values else float('nan'):.3g} ms")
    return job


def regression_of(shas: list[str], out) -> Regression:
    """The regression of the demo's metric, the largest where there are several (a busy
    machine's timing may step and raise a smaller one of its own); detection may run on the
    control worker: it is waited for."""
    deadline = time.monotonic() + (0 if settings.CELERY_TASK_ALWAYS_EAGER else DETECTION_WAIT_S)
    while True:
        found = Regression.objects.filter(
            series__repo=REPO, series__metric=demo.METRIC, series__model="demo_mlp"
        ).select_related("series").order_by("-magnitude", "-pk").first()
        if found is not None or time.monotonic() > deadline:
            break
        time.sleep(2)
    if found is None:
        raise CommandError(
            f"no regression of {demo.METRIC} in {REPO} after the nightly jobs: is detection "
            "on (BENCH_DETECT_ON_UPLOAD) and, with a broker, a worker on the control queue? "
            "Was the machine busy (the nightly medians above should be steady before the "
            "change)?")
    numbers = {sha: number for number, sha in enumerate(shas)}
    good, bad = numbers.get(found.last_good_sha), numbers.get(found.first_bad_sha)
    out.write(f"regression {found.pk}: {found.series.model} {found.series.metric} "
              f"{found.magnitude:+.0%} between commit {good} {found.last_good_sha[:12]} (last "
              f"good) and commit {bad} {found.first_bad_sha[:12]} (first bad)"
              + (f", {bad - good} commits to bisect" if good is not None and bad is not None
                 else "") + f" ({found.get_absolute_url()})")
    # Its A/B try job (regressions.confirmation): run already in-process, queued with a broker.
    out.write(f"confirmation: {found.confirmation_text or 'not asked (confirm_mode off)'}")
    return found
