"""Starting bisects and try jobs: from a regression (the spec and cell of the job that
measured it; its confirmation too), from an alert group (its worst member that can be), or
from a spec, a source and two refs. Every way checks the same things and queues one task on
the bisect's queue."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction

from benchsite.access.models import AllowedCodeModule
from benchsite.bisects.models import Bisect, Source
from benchsite.bisects.tasks import enqueue
from benchsite.comparison.directions import HIGHER, LOWER
from benchsite.jobs.models import JobCell
from benchsite.jobs.submit import JobRefused, plan_spec
from benchsite.regressions.groups import summarize
from benchsite.regressions.models import AlertGroup, Regression
from benchsite.results.models import UploadToken
from runner import families

LISTED = 10  # cells named in an error


class BisectRefused(ValueError):
    """The bisect cannot start; the message says where and why."""


def find_source(name_or_id: str | int) -> Source:
    """An admin's source by name or id; only such sources run."""
    text = str(name_or_id).strip()
    found = Source.objects.filter(name=text).first()
    if found is None and text.isascii() and text.isdigit() and int(text) < 2**63:
        found = Source.objects.filter(pk=int(text)).first()
    if found is None:
        known = ", ".join(Source.objects.values_list("name", flat=True)[:20]) or "none yet"
        raise BisectRefused(f"source {text!r}: no such source (sources are set up in the "
                            f"admin; known: {known})")
    return found


def start_spec(*, spec_yaml: str, spec_name: str, source: Source, good: str, bad: str,
               kind: str = Bisect.Kind.BISECT, head_source: Source | None = None,
               cells: str = "", metric: str = "", queue: str = "cpu", via_api: bool = False,
               user=None, token: UploadToken | None = None,
               authorize: Callable[[str, str], None] | None = None, **fields: Any) -> Bisect:
    """A bisect (one cell: `cells` must select exactly one) or an A/B try job (every cell
    `cells` selects) of a spec at two refs. `authorize(repo, queue)` raises when the caller
    may not run it (the API's token checks)."""
    if authorize is not None:
        for each in {source, head_source or source}:
            authorize(each.repo, queue)
    if queue not in settings.BENCH_QUEUES:
        raise BisectRefused(f"queue {queue!r}: unknown; the queues are {settings.BENCH_QUEUES}"
                            " (setting BENCH_QUEUES)")
    for name, ref in (("good" if kind == Bisect.Kind.BISECT else "base", good),
                      ("bad" if kind == Bisect.Kind.BISECT else "head", bad)):
        if not ref or not ref.strip() or ref.startswith("-"):
            raise BisectRefused(f"{name}: a commit sha, branch or tag is needed, not {ref!r}")
    try:
        plan = plan_spec(spec_yaml, spec_name)
    except JobRefused as error:
        raise BisectRefused(str(error)) from None
    planned = plan.cells
    if cells:
        try:
            pattern = re.compile(cells)
        except re.error as error:
            raise BisectRefused(f"cells: {cells!r} is not a regular expression: {error}") from None
        planned = [cell for cell in planned if pattern.search(cell.key)]
    keys = [cell.key for cell in plan.cells]
    if not planned:
        raise BisectRefused(f"cells: {cells!r} selects none of the spec's {len(keys)} cells: "
                            f"{', '.join(keys[:LISTED])}")
    if kind == Bisect.Kind.BISECT and len(planned) != 1:
        raise BisectRefused(
            f"cells: a bisect follows one series, so it needs one cell; {len(planned)} are "
            f"selected ({', '.join(c.key for c in planned[:LISTED])}): narrow them with a "
            "regular expression (--cells)")
    refused = AllowedCodeModule.refused(families.code_refs(plan.family, planned))
    if refused:
        raise BisectRefused(f"{spec_name}: names code from modules no admin has allowed: "
                            f"{', '.join(refused)} (the admin's Allowed code modules)")
    inline = families.inline_code(plan.family, planned)
    if inline and via_api and not (token.can(UploadToken.Scope.RUN_CODE) if token
                                   else user is not None and user.is_superuser):
        raise BisectRefused(f"{spec_name}: carries Python of its own ({', '.join(inline)}); "
                            "only a token with the 'run_code' scope or a superuser may")
    fields.setdefault("min_change", settings.BENCH_BISECT_MIN_CHANGE)
    with transaction.atomic():
        bisect = Bisect.objects.create(
            kind=kind, source=source, head_source=head_source, spec_name=spec_name,
            spec_yaml=spec_yaml, family=plan.family.NAME,
            cells=[{"key": cell.key, "cell": cell.cell} for cell in planned], metric=metric,
            good_ref=good.strip(), bad_ref=bad.strip(), queue=queue, submitted_by=user,
            submitted_token=token, **fields)
        transaction.on_commit(lambda: enqueue(bisect))
    return bisect


def start_regression(regression: Regression, *, source: Source | None = None,
                     queue: str = "", **options: Any) -> Bisect:
    """Bisect a regression's range with the spec and cell of the job that measured it."""
    cell, source, worse = measured(regression, source)
    job = cell.job
    return start_spec(
        spec_yaml=job.spec_yaml, spec_name=job.name, source=source,
        good=regression.last_good_sha, bad=regression.first_bad_sha,
        cells=f"^{re.escape(cell.key)}$", metric=regression.series.metric,
        queue=queue or job.queue, regression=regression, worse=worse,
        min_change=abs(regression.magnitude) / 2, **options)


def start_confirmation(regression: Regression) -> Bisect:
    """The A/B try job that confirms a regression: its job's cell at its last good (base)
    and first bad (head) commits, on the job's queue."""
    cell, source, worse = measured(regression, None)
    job = cell.job
    return start_spec(
        spec_yaml=job.spec_yaml, spec_name=job.name, source=source, kind=Bisect.Kind.AB,
        good=regression.last_good_sha, bad=regression.first_bad_sha,
        cells=f"^{re.escape(cell.key)}$", metric=regression.series.metric, queue=job.queue,
        regression=regression, worse=worse, confirms=True)


def measured(regression: Regression, source: Source | None) -> tuple[JobCell, Source, int]:
    """The job cell that measured a regression, the source that builds its repo's commits,
    and which way is worse (+1: higher values); BisectRefused saying why there are none."""
    series = regression.series
    where = f"regression {regression.pk}"
    if not regression.last_good_sha:
        raise BisectRefused(f"{where}: has no last good commit to start from")
    if regression.last_good_sha == regression.first_bad_sha:
        raise BisectRefused(f"{where}: its range is a single commit")
    cell = None
    for run_id in (regression.first_bad_run_id, regression.last_good_run_id):
        cell = JobCell.objects.filter(upload__runs__pk=run_id).select_related("job").first() \
            if run_id else None
        if cell is not None:
            break
    if cell is None:
        raise BisectRefused(f"{where}: its results were not measured by a job of this site, "
                            "so there is no spec to run again; start a bisect with a spec, a "
                            "source and the two commits instead")
    if source is None:
        sources = list(Source.objects.filter(repo=series.repo)[:2])
        if len(sources) != 1:
            raise BisectRefused(
                f"{where}: {'no source' if not sources else 'several sources'} for its repo "
                f"{series.repo!r}; name one (sources are set up in the admin)")
        source = sources[0]
    # Which way is worse as the site judges the metric now (an admin's override counts).
    worse = {LOWER: 1, HIGHER: -1}.get(regression.direction_now().better, 0) or (
        1 if regression.magnitude > 0 else -1)
    return cell, source, worse


def start_group(group: AlertGroup, **options: Any) -> Bisect:
    """Bisect the worst member of an alert group that can be bisected."""
    reasons = []
    for member in summarize(group.members.select_related("series")).members:
        try:
            return start_regression(member, **options)
        except BisectRefused as error:
            reasons.append(str(error))
    raise BisectRefused(f"alert group {group.pk}: no member can be bisected: "
                        + "; ".join(reasons[:3]) if reasons else
                        f"alert group {group.pk}: has no members")
