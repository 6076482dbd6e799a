"""Submitting a job: a spec planned into cells once, then one task queued per cell."""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from django.conf import settings
from django.db import transaction

from benchsite.access.models import AllowedCodeModule
from benchsite.jobs.models import ADHOC_BRANCH, Job, JobCell, adhoc_sha
from benchsite.jobs.tasks import enqueue
from benchsite.results.models import UploadToken
from runner import families
from runner.contract.repos import repo_problem
from runner.engine.cells import Planned
from runner.engine.specs import SpecError, parse_yaml


class JobRefused(ValueError):
    """The job cannot be submitted; the message says where and why."""


@dataclass(frozen=True)
class Plan:
    """A spec ready to run: the text the job keeps, its family and its cells."""

    spec_yaml: str
    family: ModuleType  # a runner.families module
    cells: list[Planned]


def plan_spec(spec_yaml: str, name: str) -> Plan:
    """Parse and plan a spec; JobRefused lists its problems."""
    try:
        family, cells = families.plan(parse_yaml(spec_yaml, name), name)
    except SpecError as error:
        raise JobRefused(str(error)) from None
    return Plan(spec_yaml, family, cells)


def submit_job(spec_yaml: str, *, name: str, **options: Any) -> Job:
    """Plan the spec and submit it (submit_plan's options)."""
    return submit_plan(plan_spec(spec_yaml, name), name=name, **options)


DEFAULT_BRANCH = "main"  # a job given a commit but no branch
COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a full git sha (SHA-1 or SHA-256)


class CommitRefused(JobRefused):
    """The job's commit fields do not name a commit; `field` is the one at fault."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def job_commit(repo: str, head_branch: str, head_sha: str) -> tuple[str, str, str]:
    """The (repo, branch, sha) a job records: a full commit sha on its branch (default
    main), or, with neither, the adhoc branch (the sha is filled in once the job has an id).
    A branch alone is refused: its head is not resolved to a commit here."""
    repo, head_branch, head_sha = repo.strip(), head_branch.strip(), head_sha.strip().lower()
    repo = repo or settings.BENCH_JOB_REPO
    if problem := repo_problem(repo):
        raise CommitRefused("repo", problem)
    if head_sha and not COMMIT.fullmatch(head_sha):
        raise CommitRefused("head_sha", f"{head_sha!r}: expected a commit's full hex sha "
                                        "(40 characters, `git rev-parse HEAD`)")
    if head_branch and not head_sha and head_branch != ADHOC_BRANCH:
        raise CommitRefused(
            "head_sha", f"branch {head_branch!r} needs the commit to measure: a branch's head "
                        "is not resolved to a sha here; give the commit, or leave both empty "
                        f"for a run of what the workers have installed (branch {ADHOC_BRANCH!r})")
    return repo, head_branch or (DEFAULT_BRANCH if head_sha else ADHOC_BRANCH), head_sha


def _may_run_inline_code(via: str, token, user) -> bool:
    """Inline code from the API needs its own grant: submit_jobs alone picks among code the
    admins installed or allowed. Configs run from the admin are maintainers' own text."""
    if via != Job.Via.API:
        return True
    if token is not None:
        return token.can(UploadToken.Scope.RUN_CODE)
    return bool(user and user.is_superuser)


def submit_plan(
    plan: Plan,
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
    config=None,
) -> Job:
    """Create the job and its cells; their tasks are queued once the transaction commits."""
    if queue not in settings.BENCH_QUEUES:
        raise JobRefused(f"queue {queue!r}: unknown; the queues are {settings.BENCH_QUEUES} "
                         "(setting BENCH_QUEUES)")
    refused = AllowedCodeModule.refused(families.code_refs(plan.family, plan.cells))
    if refused:
        raise JobRefused(
            f"{name}: names code from modules no admin has allowed: {', '.join(refused)} "
            "(allowed: the runner's own modules, the admin's Allowed code modules and the "
            "packages of the sources registered for bisection)")
    inline = families.inline_code(plan.family, plan.cells)
    if inline and not _may_run_inline_code(via, token, user):
        raise JobRefused(
            f"{name}: carries Python of its own ({', '.join(inline)}), which a worker would run "
            "as written; only a token with the 'run_code' scope, a superuser, the admin or "
            "the server's command line may submit such a spec")
    timing = timing or {}
    try:
        plan.family.check_settings(timing)
    except ValueError as error:
        raise JobRefused(f"timing: {error}") from None
    if not plan.cells:
        raise JobRefused(f"{name}: the spec expands to no cells")
    repo, head_branch, head_sha = job_commit(repo, head_branch, head_sha)

    with transaction.atomic():
        job = Job.objects.create(
            name=name, family=plan.family.NAME, spec_yaml=plan.spec_yaml, queue=queue,
            submitted_via=via, submitted_by=user, submitted_token=token, timing=timing,
            config=config, repo=repo, head_branch=head_branch, head_sha=head_sha,
            cells_total=len(plan.cells),
        )
        if not head_sha:
            job.head_sha = adhoc_sha(job.pk)
            job.save(update_fields=["head_sha"])
        JobCell.objects.bulk_create(
            JobCell(job=job, index=index, key=planned.key, cell=planned.cell)
            for index, planned in enumerate(plan.cells)
        )
        # The job is recorded whatever the broker does: unqueued (`enqueued_at` empty), the
        # sweeper queues it when the broker is back.
        transaction.on_commit(lambda: enqueue(job))
    return job
