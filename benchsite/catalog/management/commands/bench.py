"""`manage.py bench`: run, follow, cancel and schedule jobs. It lives in the catalog because
`--config NAME` runs a benchmark config of the catalog."""

import argparse
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from benchsite.catalog import schedules
from benchsite.catalog.models import BenchmarkConfig
from benchsite.catalog.run import submit_source
from benchsite.jobs import tasks
from benchsite.jobs.models import Job
from benchsite.jobs.submit import JobRefused
from runner.timing import add_timing_options, timing_overrides


class Command(BaseCommand):
    help = ("Run benchmark jobs on the workers: `bench run SPEC.yml --queue cuda --wait`, or "
            "`bench run --config NAME` for a benchmark config of the admin.")

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="action", required=True)
        run = commands.add_parser("run", help="submit a spec file or a benchmark config as a job")
        self.add_source(run)
        run.add_argument("--queue", default="cpu")
        run.add_argument("--wait", action="store_true", help="follow the job until it ends")
        run.add_argument("--repo", default="")
        run.add_argument("--branch", dest="head_branch", default="")
        run.add_argument("--sha", dest="head_sha", default="")
        add_timing_options(run)
        status = commands.add_parser("status", help="show a job")
        status.add_argument("job", type=int)
        cancel = commands.add_parser("cancel", help="cancel a job's pending cells")
        cancel.add_argument("job", type=int)
        schedule = commands.add_parser(
            "schedule", help="run a spec file or a benchmark config on a cron schedule "
            "(celery beat; edit in the admin)")
        self.add_source(schedule)
        schedule.add_argument("--queue", default="cpu")
        schedule.add_argument("--cron", default=schedules.NIGHTLY,
                              help="minute hour day-of-month month day-of-week (UTC)")
        schedule.add_argument("--name", help="the schedule's name (default: spec on queue)")

    @staticmethod
    def add_source(parser):
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("spec", type=Path, nargs="?", help="a spec file")
        source.add_argument("--config", metavar="NAME",
                            help="a benchmark config of the admin's catalog, by name")

    def handle(self, *args, action, **options):
        return getattr(self, f"do_{action}")(**options)

    def do_run(self, spec, config, queue, wait, **options):
        metadata = {key: options[key] for key in ("repo", "head_branch", "head_sha")}
        timing = timing_overrides(argparse.Namespace(**options))
        try:
            job = submit_source(spec=spec, config=config, queue=queue, via=Job.Via.COMMAND,
                                timing=timing, **metadata)
        except JobRefused as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"job {job.pk}: {job.cells_total} cells on queue {queue!r} "
                          f"({job.get_absolute_url()})")
        if wait:
            self.follow(job)

    def follow(self, job):
        shown = None
        while True:
            job.refresh_from_db()
            if (job.status, job.cells_done) != shown:
                shown = (job.status, job.cells_done)
                self.stdout.write(f"job {job.pk}: {job.status}, "
                                  f"{job.cells_done}/{job.cells_total} cells")
            if job.ended:
                break
            time.sleep(1)
        self.do_status(job.pk)
        if job.status != Job.Status.SUCCEEDED:
            raise CommandError(f"job {job.pk} ended {job.status}")

    def do_status(self, job, **options):
        job = self._job(job)
        self.stdout.write(f"job {job.pk} ({job.name}, queue {job.queue}): {job.status}")
        for cell in job.cells.all():
            reason = cell.error.strip().splitlines()[-1] if cell.error else ""
            self.stdout.write(f"  {cell.status:10} {cell.key}  {reason}")

    def do_cancel(self, job, **options):
        job = self._job(job)
        self.stdout.write(f"job {job.pk}: {tasks.cancel(job)} pending cells cancelled")

    def do_schedule(self, spec, config, queue, cron, name, **options):
        if config:
            if not BenchmarkConfig.objects.filter(name=config).exists():
                raise CommandError(f"--config {config!r}: no such benchmark config")
            source, default_name = {"config": config}, f"config {config} on {queue}"
        else:
            if not spec.is_file():
                raise CommandError(f"{spec}: no such file")
            source, default_name = {"path": str(spec)}, f"{spec.name} on {queue}"
        try:
            task, created = schedules.schedule(name or default_name, cron, queue=queue,
                                               **source)
        except ValueError as error:
            raise CommandError(f"--cron: {error}") from None
        self.stdout.write(f"{'created' if created else 'updated'} schedule {task.name!r}: "
                          f"{cron} UTC (runs under `celery -A benchsite beat`)")

    def _job(self, pk):
        try:
            return Job.objects.get(pk=pk)
        except Job.DoesNotExist:
            raise CommandError(f"job {pk}: no such job") from None
