"""`manage.py bench`: run, follow, cancel and schedule jobs. It lives in the catalog because
`--config NAME` runs a benchmark config of the catalog."""

import argparse
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from benchsite.bisects import cli as bisects
from benchsite.catalog import schedules
from benchsite.catalog.models import BenchmarkConfig
from benchsite.catalog.run import submit_source
from benchsite.jobs import tasks
from benchsite.jobs.broker import BROKER_ERRORS, consumers
from benchsite.jobs.models import ADHOC_BRANCH, Job, JobCell
from benchsite.jobs.submit import CommitRefused, JobRefused, job_commit
from runner.cli.timing_options import add_timing_options, timing_overrides

POLL_S = 0.5  # how often --wait reads the job
# How long `run` waits for workers to say which queues they take: a quick ask, then a longer
# one before saying none does (a busy machine's worker polls the embedded broker late).
WORKERS_TIMEOUTS_S = (1.0, 4.0)
OPTION = {"repo": "--repo", "head_branch": "--branch", "head_sha": "--sha"}


class Command(BaseCommand):
    help = ("Run benchmark jobs on the workers: `bench run SPEC.yml --queue cuda --wait`, or "
            "`bench run --config NAME` for a benchmark config of the admin.")

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="action", required=True)
        run = commands.add_parser("run", help="submit a spec file or a benchmark config as a job")
        self.add_source(run)
        run.add_argument("--queue", default="cpu")
        run.add_argument("--wait", action="store_true",
                         help="follow the job until it ends (a progress bar on a terminal, "
                              "each failed cell's error as it fails)")
        self.add_commit(run)
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
        bisects.add_parsers(commands)  # `bench bisect`, `bench ab`: benchsite.bisects.cli
        self.add_commit(schedule)

    @staticmethod
    def add_commit(parser):
        commit = parser.add_argument_group(
            "what is measured", "a commit (--sha, full sha; --branch defaults to main), or "
            f"nothing: the workers' installed code, recorded on the {ADHOC_BRANCH!r} branch")
        commit.add_argument("--repo", default="", help="OWNER/NAME (default BENCH_JOB_REPO)")
        commit.add_argument("--branch", dest="head_branch", default="")
        commit.add_argument("--sha", dest="head_sha", default="")

    @staticmethod
    def add_source(parser):
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("spec", type=Path, nargs="?", help="a spec file")
        source.add_argument("--config", metavar="NAME",
                            help="a benchmark config of the admin's catalog, by name")

    def handle(self, *args, action, **options):
        if action in bisects.ACTIONS:
            return bisects.handle(self, action, **options)
        return getattr(self, f"do_{action}")(**options)

    def do_run(self, spec, config, queue, wait, **options):
        metadata = {key: options[key] for key in ("repo", "head_branch", "head_sha")}
        timing = timing_overrides(argparse.Namespace(**options))
        try:
            job = submit_source(spec=spec, config=config, queue=queue, via=Job.Via.COMMAND,
                                timing=timing, **metadata)
        except CommitRefused as error:
            raise CommandError(f"{OPTION[error.field]}: {error.message}") from None
        except JobRefused as error:
            raise CommandError(str(error)) from None
        measured = "no commit (adhoc)" if job.adhoc else f"{job.head_branch} {job.head_sha[:12]}"
        self.stdout.write(f"job {job.pk}: {job.cells_total} cells on queue {queue!r}, "
                          f"{job.repo} {measured} ({job.get_absolute_url()})")
        self.tell_if_unserved(queue)
        if wait:
            self.follow(job)

    def tell_if_unserved(self, queue):
        """Say so when no worker takes `queue`'s tasks: the job would wait without a word."""
        try:
            for timeout in WORKERS_TIMEOUTS_S:
                workers = consumers(queue, timeout=timeout)
                if workers != []:
                    break
        except BROKER_ERRORS as error:
            self.stderr.write(f"the broker did not answer ({error}): the job is kept and "
                              "queued again when it is back")
            return
        if workers == []:
            self.stderr.write(
                f"no worker takes queue {queue!r} (none answered within "
                f"{sum(WORKERS_TIMEOUTS_S):g} s): the job waits until one does. Start one "
                f"with `.venv/bin/celery -A benchsite worker -Q {queue} -c 1` (scripts/run "
                "starts the cpu and control queues' workers).")

    def follow(self, job):
        """Until the job ends: a bar of its cells on stderr (a line per cell done when stderr
        is not a terminal, e.g. a log file) and each failed cell's error on stdout as it
        fails; then every cell's state."""
        told = set()
        bar = tqdm(total=job.cells_total, unit="cell", desc=f"job {job.pk}",
                   file=self.stderr._out, disable=None, dynamic_ncols=True)
        done = 0
        with bar:
            while True:
                job.refresh_from_db()
                bar.update(job.cells_done - bar.n)
                if bar.disable and job.cells_done != done:  # not a terminal: a line, not a bar
                    self.stderr.write(f"job {job.pk}: {job.cells_done}/{job.cells_total} cells "
                                      f"done ({job.status})")
                done = job.cells_done
                bar.set_postfix_str(job.status, refresh=False)
                failed = job.cells.filter(status=JobCell.Status.FAILED).exclude(pk__in=told)
                for cell in failed.order_by("index"):
                    told.add(cell.pk)
                    bar.write(f"cell {cell.index} {cell.key} failed: {_last_line(cell.error)}",
                              file=self.stdout._out)
                if job.ended:
                    break
                time.sleep(POLL_S)
        self.do_status(job.pk)
        if job.status != Job.Status.SUCCEEDED:
            raise CommandError(f"job {job.pk} ended {job.status}")

    def do_status(self, job, **options):
        job = self._job(job)
        self.stdout.write(f"job {job.pk} ({job.name}, queue {job.queue}): {job.status}")
        for cell in job.cells.all():
            self.stdout.write(f"  {cell.status:10} {cell.key}  {_last_line(cell.error)}")

    def do_cancel(self, job, **options):
        job = self._job(job)
        self.stdout.write(f"job {job.pk}: {tasks.cancel(job)} pending cells cancelled")

    def do_schedule(self, spec, config, queue, cron, name, repo, head_branch, head_sha,
                    **options):
        if config:
            if not BenchmarkConfig.objects.filter(name=config).exists():
                raise CommandError(f"--config {config!r}: no such benchmark config")
            source, default_name = {"config": config}, f"config {config} on {queue}"
        else:
            if not spec.is_file():
                raise CommandError(f"{spec}: no such file")
            source, default_name = {"path": str(spec)}, f"{spec.name} on {queue}"
        commit = {"repo": repo, "head_branch": head_branch, "head_sha": head_sha}
        try:
            job_commit(**commit)  # refused now rather than at every run
        except CommitRefused as error:
            raise CommandError(f"{OPTION[error.field]}: {error.message}") from None
        commit = {key: value for key, value in commit.items() if value}
        try:
            task, created = schedules.schedule(name or default_name, cron, queue=queue,
                                               **source, **commit)
        except ValueError as error:
            raise CommandError(f"--cron: {error}") from None
        self.stdout.write(f"{'created' if created else 'updated'} schedule {task.name!r}: "
                          f"{cron} UTC (runs under `celery -A benchsite beat`)")

    def _job(self, pk):
        try:
            return Job.objects.get(pk=pk)
        except Job.DoesNotExist:
            raise CommandError(f"job {pk}: no such job") from None


def _last_line(error: str) -> str:
    """A cell's skip reason or its traceback's last line (the exception)."""
    return error.strip().splitlines()[-1] if error.strip() else ""
