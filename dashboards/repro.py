"""The commands that reproduce a job's cell (on the job's and the run's pages) or a regression
on one machine (issue 32): the spec (its fixtures/specs file, or saved from the jobs API),
the commit checked out, then `python -m runner run SPEC --cells '^KEY$'`; for a regression
both of its ends, and `manage.py bench ab` for the pair where a source of its repo is set
up. A series or run only CI uploaded has no spec here: what is known is said instead of a
command."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.db.models import F
from django.urls import reverse

from benchsite.bisects.models import Source
from benchsite.jobs.models import Job, JobCell
from benchsite.regressions.models import Regression
from benchsite.results.models import Run
from dashboards.render import Table
from runner.contract.repos import is_repo
from runner.engine.selection import one_cell

SPECS = Path("fixtures") / "specs"  # the specs shipped with the site, relative to its root
COLUMNS = ["for", "command", "notes"]


@dataclass
class Repro:
    title: str  # what it reproduces: "cell KEY", "regression N"
    lines: list[str] = field(default_factory=list)  # shell commands, run in order
    notes: list[str] = field(default_factory=list)  # what the commands need, or why none

    @property
    def command(self) -> str:
        return "\n".join(self.lines)

    def row(self) -> list:
        return [self.title, self.command or None, " ".join(self.notes) or None]


def table(repros: list[Repro]) -> Table:
    """The page's JSON and CSV carry the commands as the table `repro` (its HTML shows them
    with _repro.html)."""
    return Table("repro", COLUMNS, [repro.row() for repro in repros], templated=True)


def for_cells(job: Job, cells: list[JobCell], absolute: Callable[[str], str]) -> list[Repro]:
    """Each cell of a job at the job's commit (the spec and the checkout found once)."""
    common = Repro("")
    spec = _spec(job, absolute, common)
    prefix = []
    if job.adhoc:
        common.notes.append("The job ran without a commit (adhoc): run it with the version of "
                            f"{job.repo} you have installed.")
    else:
        checkout, prefix = _checkout(job.repo, common)
        common.lines.append(shlex.join(["git", "-C", checkout, "checkout", job.head_sha]))
    return [Repro(f"cell {cell.key}", [*common.lines, _run(spec, cell.key, prefix)],
                  list(common.notes)) for cell in cells]


def for_regressions(regressions: list[Regression],
                    absolute: Callable[[str], str]) -> list[Repro]:
    """Each regression's series at its last good and first bad commits, with the spec and
    cell of the newest job that measured either end; the pair as an A/B try job where a
    source is set up. The jobs' cells, the sources and the specs are read once for all (an
    alert group of 144 regressions made 146 queries, 0.4 s)."""
    ends = {regression.pk: [pk for pk in (regression.first_bad_run_id,
                                          regression.last_good_run_id) if pk]
            for regression in regressions}
    newest: dict[int, JobCell] = {}  # by run: the newest job's cell that stored it
    for cell in (JobCell.objects.filter(upload__runs__pk__in={pk for runs in ends.values()
                                                                for pk in runs})
                 .annotate(run_pk=F("upload__runs__pk")).select_related("job")
                 .order_by("-job__created_at", "-pk")):
        newest.setdefault(cell.run_pk, cell)
    sources = _Sources()
    specs: dict[int, tuple[str, Repro]] = {}  # by job: its spec's path, the lines to get it
    repros = []
    for regression in regressions:
        cells = [newest[pk] for pk in ends[regression.pk] if pk in newest]
        cell = max(cells, key=lambda c: (c.job.created_at, c.pk), default=None)
        repros.append(_for_regression(regression, cell, sources, specs, absolute))
    return repros


def _for_regression(regression: Regression, cell: JobCell | None, sources: _Sources,
                    specs: dict[int, tuple[str, Repro]],
                    absolute: Callable[[str], str]) -> Repro:
    series = regression.series
    repro = Repro(f"regression {regression.pk}")
    if cell is None:
        repro.notes.append(_no_spec(
            f"repo {series.repo}, branch {regression.branch}, commits "
            f"{regression.last_good_sha or '?'}..{regression.first_bad_sha}, benchmark "
            f"{series.benchmark!r}, model {series.model!r}, metric {series.metric!r}",
            "both commits"))
        return repro
    if cell.job_id not in specs:
        getting = Repro("")
        specs[cell.job_id] = (_spec(cell.job, absolute, getting), getting)
    spec, getting = specs[cell.job_id]
    repro.lines += getting.lines
    repro.notes += getting.notes
    checkout, prefix = _checkout(series.repo, repro, sources)
    for name, sha in (("good", regression.last_good_sha), ("bad", regression.first_bad_sha)):
        if sha:
            repro.lines.append(shlex.join(["git", "-C", checkout, "checkout", sha]))
            repro.lines.append(_run(spec, cell.key, prefix, output=f"{name}.json"))
    source = sources.of(series.repo)
    if source is not None and regression.last_good_sha:
        repro.lines.append(shlex.join([
            "python", "manage.py", "bench", "ab", "--spec", spec, "--source", source.name,
            "--base", regression.last_good_sha, "--head", regression.first_bad_sha,
            "--cells", one_cell(cell.key), "--queue", cell.job.queue, "--wait"]))
        repro.notes.append(f"bench ab runs the pair on a worker of queue {cell.job.queue!r} "
                           "(on the site's machine, from its root).")
    return repro


def for_run(run: Run, absolute: Callable[[str], str]) -> list[Repro]:
    """The cells of the job whose upload stored the run; a run uploaded without a job of
    this site gets what is known instead."""
    cells = list(JobCell.objects.filter(upload_id=run.upload_id).select_related("job")
                 .order_by("index"))
    if cells:
        return for_cells(cells[0].job, cells, absolute)
    return [Repro(f"run {run.pk}", notes=[_no_spec(
        f"repo {run.repo}, branch {run.head_branch}, commit {run.head_sha}, machine "
        f"{run.device} ({run.arch})", "that commit")])]


def _no_spec(known: str, commits: str) -> str:
    return ("No spec is stored: its results were uploaded without a job of this site (e.g. "
            f"by CI). Known: {known}. Run the benchmark that uploaded it at {commits}.")


def _run(spec: str, key: str, prefix: list[str] | None = None, output: str = "") -> str:
    words = [*(prefix or []), "python", "-m", "runner", "run", spec, "--cells", one_cell(key)]
    return shlex.join(words + (["-o", output] if output else []))


def _spec(job: Job, absolute: Callable[[str], str], repro: Repro) -> str:
    """The spec's path: the site's own file when the job ran it unchanged, else a file the
    first command saves from the jobs API."""
    name = PurePosixPath(job.name).name
    shipped = Path(settings.BASE_DIR) / SPECS / name
    if name and shipped.is_file() and shipped.read_text() == job.spec_yaml:
        return str(SPECS / name)
    saved = f"job-{job.pk}.yml"
    url = absolute(reverse("api-job", args=[job.pk]))
    read = 'import json, sys; sys.stdout.write(json.load(sys.stdin)["spec_yaml"])'
    repro.lines.append(f"curl -sSf {shlex.quote(url)} | python -c {shlex.quote(read)} "
                       f"> {shlex.quote(saved)}")
    if settings.BENCH_LOGIN_REQUIRED:
        repro.notes.append("The API needs a token with the read scope: add "
                           "-H \"Authorization: Bearer $TOKEN\" to curl.")
    repro.notes.append(f"The spec is job {job.pk}'s, as submitted (also on its page).")
    return saved


class _Sources:
    """The one source set up for each repo (bisects pick it the same way), else None; each
    repo looked up once."""

    def __init__(self):
        self._found: dict[str, Source | None] = {}

    def of(self, repo: str) -> Source | None:
        if repo not in self._found:
            sources = list(Source.objects.filter(repo=repo)[:2])
            self._found[repo] = sources[0] if len(sources) == 1 else None
        return self._found[repo]


def _checkout(repo: str, repro: Repro,
              sources: _Sources | None = None) -> tuple[str, list[str]]:
    """Where the repo is checked out (the clone command first) and what the runner's command
    needs before it to use that checkout."""
    source = (sources or _Sources()).of(repo)
    location = source.location if source else (
        f"https://github.com/{repo}" if is_repo(repo) else "")
    checkout = PurePosixPath(repo).name or "checkout"
    if location:
        repro.lines.append(shlex.join(["git", "clone", location, checkout]))
    else:
        repro.notes.append(f"Clone {repo} into {checkout}/ first: no source of it is set up.")
    if source is None:
        repro.notes.append(f"Install the checkout (e.g. pip install -e {checkout}) or put it "
                           "on PYTHONPATH before running.")
        return checkout, []
    env = [f"{name}={value}" for name, value in source.recipe().env.items()]
    if source.mode == Source.Mode.PYTHONPATH:
        folders = [str(PurePosixPath(checkout) / folder)
                   for folder in source.recipe().pythonpath]
        env += [f"PYTHONPATH={':'.join(folders)}"] if folders else []
    else:
        build = source.build_command.replace("{checkout}", checkout)
        repro.notes.append(f"Build the checkout as source {source.name!r} does, then run: "
                           f"{build.replace('{python}', 'python')}")
    return checkout, ["env", *env] if env else []
