"""Measuring one round at one commit for a bisect or try job: the commit is built on this
worker, its cells run in a subprocess with its environment, and the records are stored
through the upload path (`store_upload`) in the transaction that adds the round to its
step. The upload's idempotency key names the bisect, the step and the round, so a round
re-run after a worker died stores nothing twice."""

from __future__ import annotations

import orjson
from django.conf import settings
from django.db import transaction

from benchsite.bisects.models import Bisect, BisectStep, Source
from benchsite.bisects.search import Skip
from benchsite.comparison.directions import HIGHER, LOWER, direction_of
from benchsite.results.ingest import store_upload
from benchsite.results.models import Upload
from runner.contract.status import OK
from runner.sources.builds import BuildFailed, Workspace
from runner.sources.commit import RunFailed, run_cells
from runner.sources.git import GitError


def label(key: str, metric: str) -> str:
    """A series measured by a bisect or try job: its cell and metric."""
    return f"{key} · {metric}"


class SiteLab:
    """search.Lab over a Bisect's steps."""

    def __init__(self, bisect: Bisect):
        self.bisect = bisect
        self.steps = {step.position: step for step in bisect.steps.all()}
        self.workspaces: dict[int, Workspace] = {}

    def source(self, position: int) -> Source:
        if self.bisect.kind == Bisect.Kind.AB and position == 1 and self.bisect.head_source:
            return self.bisect.head_source
        return self.bisect.source

    def workspace(self, position: int) -> Workspace:
        source = self.source(position)
        if source.pk not in self.workspaces:
            self.workspaces[source.pk] = source.workspace()
        return self.workspaces[source.pk]

    def tracked(self) -> str:
        return label(self.bisect.cells[0]["key"], self.bisect.metric)

    def _rounds(self, position: int, partner: int, attempt: int = 0) -> list[dict]:
        step = self.steps.get(position)
        return [entry for entry in (step.rounds if step else [])
                if entry["with"] == partner and entry.get("attempt", 0) == attempt]

    def rounds(self, position: int, partner: int, attempt: int = 0,
               series: str = "") -> list[list[float]]:
        """Each round's repetitions of `series` (default: the followed one)."""
        name = series or self.tracked()
        return [entry["values"].get(name, [])
                for entry in self._rounds(position, partner, attempt)]

    def step(self, position: int) -> BisectStep:
        if position not in self.steps:
            sha = self.bisect.commits[position]
            workspace = self.workspace(position)
            try:
                commit = workspace.repo.commit(sha)
            except GitError as error:
                raise Skip(str(error)) from None
            side = "" if self.bisect.kind == Bisect.Kind.BISECT else ("base", "head")[position]
            self.steps[position], _ = BisectStep.objects.get_or_create(
                bisect=self.bisect, position=position, defaults={
                    "sha": sha, "side": side, "subject": commit.subject[:500],
                    "author": commit.author[:255], "committed_at": commit.date})
        return self.steps[position]

    def measure(self, position: int, partner: int, attempt: int = 0) -> None:
        step = self.step(position)
        if step.verdict == "skipped":
            raise Skip(step.failure)
        number = len(step.rounds) + 1
        again = f" (comparison {attempt + 1})" if attempt else ""
        self.say(f"measuring {step.sha[:12]} ({self._where(position)}), round {number}, "
                 f"compared with {self._where(partner)}{again}")
        keep = frozenset(self.bisect.commits[p] for p in (0, len(self.bisect.commits) - 1))
        try:
            built = self.workspace(position).build(step.sha, keep=keep)
            runs = run_cells(built, self.bisect.family, self.bisect.cells, {},
                             settings.BENCH_BISECT_RUN_TIMEOUT,
                             self.bisect.files(step.sha, number))
        except BuildFailed as error:
            self.skip(step, f"does not build: {error.reason}\n{error.log_tail}")
        except RunFailed as error:
            self.skip(step, f"does not run: {error.reason}\n{error.output_tail}")
        failed = [run for run in runs if run.status != OK]
        if self.bisect.kind == Bisect.Kind.BISECT and failed:
            error = failed[0].error.strip()
            self.skip(step, f"does not run: its cell {failed[0].status}: "
                            f"{error.splitlines()[-1] if error else 'no error given'}\n"
                            f"{error[-4000:]}")
        values = {label(run.key, record["metric"]["name"]): record["metric"]["benchmark_values"]
                  for run in runs for record in run.records
                  if record["metric"].get("benchmark_values")}
        if self.bisect.kind == Bisect.Kind.BISECT and not self.bisect.metric:
            self.choose_metric(runs[0].records)
        if self.bisect.kind == Bisect.Kind.BISECT and self.tracked() not in values:
            self.skip(step, f"its records have no values of {self.bisect.metric!r} "
                            f"(they have: {', '.join(values) or 'none'})")
        records = [record for run in runs for record in run.records]
        with transaction.atomic():
            stored = store_upload(
                orjson.dumps(records), source=Upload.Source.WORKER,
                metadata={"repo": self.source(position).repo, "head_branch": self.bisect.branch,
                          "head_sha": step.sha, "workflow_id": self.bisect.pk,
                          "job_id": step.pk, "run_attempt": number,
                          "name": self.bisect.spec_name},
                idempotency_key=f"bisect-{self.bisect.pk}-step-{step.pk}-round-{number}")
            entry = {"upload": stored.upload.pk, "with": partner, "values": values}
            step.rounds = [*step.rounds, entry | ({"attempt": attempt} if attempt else {})]
            step.save(update_fields=["rounds", "updated_at"])

    def skip(self, step: BisectStep, why: str) -> None:
        step.verdict, step.failure = "skipped", why
        step.save(update_fields=["verdict", "failure", "updated_at"])
        raise Skip(why)

    def choose_metric(self, records: list[dict]) -> None:
        """A bisect started without a metric follows the cell's first numeric one; which way
        is worse comes from the site's directions (an admin's override, else the record
        contract's)."""
        first = next((r for r in records if r["metric"].get("benchmark_values")), None)
        if first is None:
            return
        metric = first["metric"]["name"]
        better = direction_of(metric, first.get("benchmark", {}).get("name", ""),
                              first["metric"].get("extra_info", {}).get("unit", "")).better
        self.bisect.metric = metric
        self.bisect.worse = {LOWER: 1, HIGHER: -1}.get(better, 0)
        self.bisect.save(update_fields=["metric", "worse"])

    def _where(self, position: int) -> str:
        if self.bisect.kind == Bisect.Kind.AB:
            return ("base", "head")[position]
        return f"{position}/{len(self.bisect.commits) - 1}"

    def say(self, text: str) -> None:
        self.bisect.progress = text[:500]
        Bisect.objects.filter(pk=self.bisect.pk).update(progress=self.bisect.progress)
