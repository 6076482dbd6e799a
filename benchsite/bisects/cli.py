"""`manage.py bench bisect ...` and `bench ab ...` (hooked into the catalog's `bench`).

    bench bisect --spec SPEC.yml --source PATH_OR_URL --good SHA --bad SHA
                 [--cells REGEX] [--metric NAME] [--queue cpu] [--wait] [--json]
    bench bisect --regression ID [--wait] [--json]
    bench ab --spec SPEC.yml --source S --base REF --head REF [--head-source S] [--queue cpu]
             [--cells REGEX] [--wait]
    bench demo-bisect [--folder DIR] [--bisect]

With --wait they follow it (progress on stdout, on stderr with --json) and `bench bisect`
ends with `culprit: SHA` and exit status 0 for a culprit, 3 for not reproduced, 1 otherwise.
`--json` prints the bisect as GET /api/v3/bisects/ID does (`state`, `culprit_sha`, `steps`).
The operator's `--source` may be a source's name or id, or a path or URL: a source in
pythonpath mode is then made (or reused) for it. `bench demo-bisect` makes the demo's
regression from nightly jobs of a throwaway repository (benchsite.bisects.demo) and, with
--bisect, bisects it.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError
from django.utils.text import slugify

from benchsite.bisects import demo
from benchsite.bisects.models import GITHUB, Bisect, Source, describe
from benchsite.bisects.start import BisectRefused, find_source, start_regression, start_spec
from benchsite.regressions.models import Regression

ACTIONS = ("bisect", "ab", "demo-bisect")
NOT_REPRODUCED_EXIT = 3


def add_parsers(commands) -> None:
    bisect = commands.add_parser(
        "bisect", help="find the commit that changed a benchmark (on a worker)",
        description="Bisect a spec's cell between two commits of a source, or a regression.")
    bisect.add_argument("--regression", type=int, metavar="ID",
                        help="bisect this regression (its job's spec and cell, its range)")
    bisect.add_argument("--spec", type=Path, help="a spec file")
    bisect.add_argument("--source", metavar="PATH_OR_URL",
                        help="a source (name or id), or a git repository's path or URL")
    bisect.add_argument("--good", metavar="SHA")
    bisect.add_argument("--bad", metavar="SHA")
    bisect.add_argument("--cells", default="", metavar="REGEX",
                        help="selects the one cell to follow (by its key)")
    bisect.add_argument("--metric", default="", metavar="NAME",
                        help="the metric followed (default: the cell's first numeric one)")
    bisect.add_argument("--queue", default="", help="default: cpu, or the regression's job's")
    bisect.add_argument("--wait", action="store_true", help="follow it until it ends")
    bisect.add_argument("--json", action="store_true", help="print it as one JSON object")
    ab = commands.add_parser(
        "ab", help="A/B try job: a spec at two refs, interleaved on one worker")
    ab.add_argument("--spec", type=Path, required=True)
    ab.add_argument("--source", required=True, metavar="S", help="the base's source")
    ab.add_argument("--base", required=True, metavar="REF")
    ab.add_argument("--head", required=True, metavar="REF")
    ab.add_argument("--head-source", metavar="S", help="the head's source, if another one")
    ab.add_argument("--queue", default="cpu")
    ab.add_argument("--cells", default="", metavar="REGEX",
                    help="only the cells whose key it matches (default: every cell)")
    ab.add_argument("--wait", action="store_true", help="follow it until it ends")
    example = commands.add_parser(
        "demo-bisect", help="the bisection demo: a regression raised by nightly jobs of a "
        "throwaway repository (and, with --bisect, its culprit)",
        description="Make the demo repository (runner.sources.demo) and its source 'demo', "
        "run the demo spec as nightly jobs at its commits on this machine (each "
        "commit built as the source builds it), and print the regression detection raised "
        "and the command that bisects it.")
    example.add_argument("--folder", type=Path, default=Path(settings.VAR_DIR) / "demo-bisect",
                         help="where the repository and the spec go (default: %(default)s)")
    example.add_argument("--bisect", action="store_true",
                         help="then bisect it, as bench bisect --regression N --wait")
    example.add_argument("--queue", default="cpu", help="the jobs' and the bisect's queue")


def handle(command, action: str, **options) -> None:
    if action == "demo-bisect":
        return demo_bisect(command, **options)
    try:
        bisect = (start_ab if action == "ab" else start_bisect)(**options)
    except BisectRefused as error:
        raise CommandError(str(error)) from None
    as_json = options.get("json", False)
    out = command.stderr if as_json else command.stdout
    out.write(f"{bisect.get_kind_display()} {bisect.pk}: {len(bisect.cells)} cell(s) on queue "
              f"{bisect.queue!r}, runs on branch {bisect.branch} ({bisect.get_absolute_url()})")
    if options["wait"]:
        bisect = follow(bisect, out)
    if as_json:
        command.stdout.write(json.dumps(describe(bisect)))
    elif options["wait"]:
        report(bisect, command.stdout)
    if options["wait"] and action == "bisect" and bisect.state != Bisect.State.CULPRIT:
        code = NOT_REPRODUCED_EXIT if bisect.state == Bisect.State.NOT_REPRODUCED else 1
        raise CommandError(f"bisect {bisect.pk} ended {bisect.state}", returncode=code)
    if options["wait"] and bisect.state == Bisect.State.FAILED:
        raise CommandError(f"{bisect.get_kind_display()} {bisect.pk} failed")


def demo_bisect(command, *, folder: Path, bisect: bool, queue: str, **options) -> None:
    regression = demo.prepare(folder, command.stdout, queue=queue)
    if not bisect:
        command.stdout.write(f"bisect it: python manage.py bench bisect --regression "
                             f"{regression.pk} --wait")
        return
    handle(command, "bisect", regression=regression.pk, spec=None, source=None, good=None,
           bad=None, cells="", metric="", queue=queue, wait=True, json=False)


def start_bisect(*, regression, spec, source, good, bad, cells, metric, queue, **options):
    if regression is not None:
        extra = [f"--{name}" for name, value in (("spec", spec), ("good", good), ("bad", bad),
                                                 ("cells", cells), ("metric", metric)) if value]
        if extra:
            raise BisectRefused(f"--regression: takes its spec, cell and commits from the "
                                f"regression; drop {', '.join(extra)}")
        found = Regression.objects.select_related("series").filter(pk=regression).first()
        if found is None:
            raise BisectRefused(f"--regression {regression}: no such regression")
        return start_regression(found, source=operator_source(source) if source else None,
                                queue=queue)
    missing = [f"--{name}" for name, value in (("spec", spec), ("source", source),
                                                ("good", good), ("bad", bad)) if not value]
    if missing:
        raise BisectRefused(f"give --regression ID, or --spec, --source, --good and --bad "
                            f"(missing: {', '.join(missing)})")
    return start_spec(spec_yaml=read(spec), spec_name=spec.name, source=operator_source(source),
                      good=good, bad=bad, cells=cells, metric=metric, queue=queue or "cpu")


def start_ab(*, spec, source, base, head, head_source, queue, cells, **options):
    return start_spec(spec_yaml=read(spec), spec_name=spec.name, kind=Bisect.Kind.AB,
                      source=operator_source(source), good=base, bad=head, queue=queue,
                      cells=cells,
                      head_source=operator_source(head_source) if head_source else None)


def read(spec: Path) -> str:
    try:
        return spec.read_text()
    except OSError as error:
        raise BisectRefused(f"--spec {spec}: {error.strerror}") from None


def operator_source(text: str) -> Source:
    """A source by name or id; else a path or URL, for which a pythonpath source is made
    (the server's operator may: an API caller may only name the admin's sources)."""
    try:
        return find_source(text)
    except BisectRefused:
        if not (Path(text).is_dir() or re.match(r"^(https?|ssh|git)://|^[\w.-]+@[\w.-]+:", text)):
            raise
    location = str(Path(text).resolve()) if Path(text).is_dir() else text
    existing = Source.objects.filter(location=location).order_by("pk").first()
    if existing is not None:
        return existing
    github = GITHUB.match(location)
    stem = github.group(1) if github else Path(location.rstrip("/")).name.removesuffix(".git")
    digest = hashlib.sha256(location.encode()).hexdigest()[:6]
    return Source.objects.create(name=slugify(f"{stem.replace('/', '-')}-{digest}")[:100],
                                 location=location, repo=stem if github else f"local/{stem}")


def follow(bisect: Bisect, out) -> Bisect:
    shown = None
    while True:
        bisect.refresh_from_db()
        line = f"{bisect.get_kind_display()} {bisect.pk}: {bisect.get_state_display()}" + (
            f", {bisect.progress}" if bisect.progress else "")
        if line != shown:
            out.write(line)
            shown = line
        if bisect.ended:
            return bisect
        time.sleep(1)


def report(bisect: Bisect, out) -> None:
    """The outcome in words; a bisect's last line says it in one."""
    outcome = bisect.outcome
    for step in bisect.steps.all():
        rounds = sum(len(r["values"].get(next(iter(r["values"]), ""), [])) for r in step.rounds)
        out.write(f"  {step.side or step.position:>5}  {step.sha[:12]}  "
                  f"{step.verdict or '-':8}  {len(step.rounds)} round(s), {rounds} values  "
                  f"{step.subject[:60]}")
    for skipped in outcome.get("skipped", []):
        out.write(f"skipped {skipped['sha'][:12]}: {skipped['failure'].splitlines()[0]}")
    for row in outcome.get("series", []):
        p = f"p={row['p_value']:.2g}" if row["p_value"] is not None else "p=n/a"
        out.write(f"  {row['series']}: {row['base_median']:.4g} -> {row['head_median']:.4g} "
                  f"({row['change']:+.1%}, {p}{', significant' if row['significant'] else ''})")
    if outcome.get("message"):
        out.write(outcome["message"])
    if bisect.kind == Bisect.Kind.AB:
        out.write(f"{bisect.state}: compare {bisect.good_sha[:12]}...{bisect.bad_sha[:12]}")
    elif bisect.state == Bisect.State.CULPRIT:
        culprit = outcome["culprit"]
        out.write(f"{culprit['subject']} ({culprit['author']}) {culprit['url']}".strip())
        out.write(f"culprit: {bisect.culprit_sha}")
    elif bisect.state == Bisect.State.AMBIGUOUS:
        out.write("ambiguous: " + " ".join(c["sha"] for c in outcome.get("candidates", [])))
    else:
        out.write(f"{bisect.get_state_display()}")
