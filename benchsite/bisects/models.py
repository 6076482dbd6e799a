"""Sources (admin-managed repositories that workers build), bisects and A/B try jobs, and
the commits they measured."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from benchsite import links
from benchsite.access.models import check_provided_module
from runner.contract.repos import repo_problem
from runner.sources import builds
from runner.sources.builds import Recipe, Workspace


def split_modules(value: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(name.strip() for name in value.split(",") if name.strip()))


def check_modules(value: str) -> None:
    for name in split_modules(value):
        check_provided_module(name)


GITHUB = re.compile(r"^(?:https://github\.com/|git@github\.com:)([\w.-]+/[\w.-]+?)(?:\.git)?/?$")


class Source(models.Model):
    """A project's git repository and how a worker builds one of its commits. A source runs
    arbitrary code on the workers: only admins create them, and the API names them."""

    class Mode(models.TextChoices):
        PYTHONPATH = builds.PYTHONPATH, "pythonpath: the checkout first on PYTHONPATH"
        COMMAND = builds.COMMAND, "command: a build command in a per-commit virtualenv"

    name = models.SlugField(max_length=100, unique=True, help_text="how the API and CLI name it")
    location = models.CharField(
        max_length=500, help_text="a git URL, or a path on the workers (a local clone)")
    repo = models.CharField(
        max_length=255, help_text="the repo its results are stored under, e.g. 'pytorch/ao' "
        "(the regressions of that repo bisect with this source)")
    web_url = models.URLField(
        blank=True, help_text="where its commits are shown (commit links: URL/commit/SHA); "
        "derived from a GitHub location when empty")
    mode = models.CharField(max_length=20, choices=Mode.choices, default=Mode.PYTHONPATH)
    build_command = models.TextField(
        blank=True, help_text="command mode: a shell command run in the checkout with "
        "{checkout}, {python} and {venv} filled in, e.g. "
        "'pip install --no-deps --no-build-isolation -e {checkout}'")
    pythonpath = models.CharField(
        max_length=500, default=".", blank=True,
        help_text="folders inside the checkout put first on PYTHONPATH, comma-separated "
        "('.': the checkout itself, 'src' for a src layout; empty: none)")
    env = models.JSONField(default=dict, blank=True,
                           help_text="extra environment of builds and runs, e.g. "
                                     '{"USE_CPP": "0"}')
    build_timeout_s = models.PositiveIntegerField(default=1800)
    modules = models.CharField(
        max_length=500, blank=True, validators=[check_modules],
        help_text="the packages its checkout provides, comma-separated, e.g. 'torchao': job "
        "specs may name their code (module:function) while this source exists (the "
        "allow-list of code modules)")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def module_names(self) -> tuple[str, ...]:
        return split_modules(self.modules)

    def recipe(self) -> Recipe:
        folders = tuple(p.strip() for p in self.pythonpath.split(",") if p.strip())
        return Recipe(mode=self.mode, command=self.build_command, pythonpath=folders,
                      env=dict(self.env) if isinstance(self.env, dict) else {},
                      timeout_s=self.build_timeout_s)

    def clean(self) -> None:
        problems = [] if isinstance(self.env, dict) else ["env: must be a JSON object"]
        problems += [f"repo: {problem}"] if (problem := repo_problem(self.repo)) else []
        problems += self.recipe().problems()
        if problems:
            raise ValidationError("; ".join(problems))

    def workspace(self) -> Workspace:
        return Workspace(self.location, self.recipe(),
                         Path(settings.BENCH_SOURCE_CACHE) / f"{self.pk}-{self.name}",
                         settings.BENCH_SOURCE_CACHE_BYTES)

    def commit_url(self, sha: str) -> str:
        if self.web_url:
            return f"{self.web_url.rstrip('/')}/commit/{sha}"
        found = GITHUB.match(self.location)
        return f"https://github.com/{found.group(1)}/commit/{sha}" if found else ""


class Bisect(models.Model):
    """A bisection between a good and a bad commit, or an A/B try job of two refs."""

    class Kind(models.TextChoices):
        BISECT = "bisect"
        AB = "ab", "A/B try job"

    class State(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        CULPRIT = "culprit"
        NOT_REPRODUCED = "not_reproduced", "not reproduced"
        AMBIGUOUS = "ambiguous"
        FAILED = "failed"
        FINISHED = "finished"  # an A/B try job that ran

    ENDED = (State.CULPRIT, State.NOT_REPRODUCED, State.AMBIGUOUS, State.FAILED, State.FINISHED)

    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.BISECT)
    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="bisects",
                               help_text="the good end's, or an A/B's base")
    head_source = models.ForeignKey(
        Source, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
        help_text="A/B: the head's source when it is another one")
    regression = models.ForeignKey(
        "regressions.Regression", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="bisects", help_text="the regression it was started from, if any")
    confirms = models.BooleanField(
        default=False, help_text="A/B: it confirms its regression before the regression is "
        "told (regressions.confirmation)")
    spec_name = models.CharField(max_length=255)
    spec_yaml = models.TextField(help_text="the spec as submitted (a snapshot)")
    family = models.CharField(max_length=50)
    cells = models.JSONField(help_text="the planned cells it runs: [{key, cell}]")
    metric = models.CharField(max_length=255, blank=True, help_text="bisect: the metric followed")
    worse = models.SmallIntegerField(
        default=0, help_text="+1: higher values are worse, -1: lower ones, 0: unknown (the "
                             "ends' own change is the regression)")
    good_ref = models.CharField(max_length=255, help_text="good end, or A/B base, as given")
    bad_ref = models.CharField(max_length=255, help_text="bad end, or A/B head, as given")
    good_sha = models.CharField(max_length=64, blank=True)
    bad_sha = models.CharField(max_length=64, blank=True)
    commits = models.JSONField(default=list, blank=True,
                               help_text="bisect: the range's shas, the good end first")
    min_change = models.FloatField(
        default=0.05, help_text="relative change of the ends that reproduces the regression")
    queue = models.CharField(max_length=100, default="cpu")
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    progress = models.CharField(max_length=500, blank=True, help_text="what it does now")
    outcome = models.JSONField(default=dict, blank=True,
                               help_text="the verdict: culprit, candidates, skipped, message")
    culprit_sha = models.CharField(max_length=64, blank=True)
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                     on_delete=models.SET_NULL)
    submitted_token = models.ForeignKey("results.UploadToken", null=True, blank=True,
                                        on_delete=models.SET_NULL)
    notified_at = models.DateTimeField(null=True, blank=True, editable=False,
                                       help_text="when its culprit was told to the targets")
    worker = models.CharField(max_length=255, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    enqueued_at = models.DateTimeField(
        null=True, blank=True, help_text="when its task was last handed to the broker; empty "
        "while the broker could not take it (the sweeper queues it when it is back)")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.pk}: {self.good_ref}..{self.bad_ref}"

    def get_absolute_url(self) -> str:
        return links.bisect_url(self.pk)

    @property
    def ended(self) -> bool:
        return self.state in self.ENDED

    def files(self, sha: str, round_number: int) -> Path:
        """The folder on the worker for the files of one round at `sha` (runner.engine.folders)."""
        return (Path(settings.BENCH_FILES_DIR) / "bisects" / str(self.pk)
                / f"{sha[:12]}-{round_number}")

    @property
    def branch(self) -> str:
        """The branch its runs are stored on: never a default branch's history."""
        return f"{'bisect' if self.kind == self.Kind.BISECT else 'try'}/{self.pk}"


class BisectStep(models.Model):
    """One commit a bisect or try job measured (or skipped): its rounds of repetitions."""

    class Side(models.TextChoices):
        RANGE = "", "in the range"
        BASE = "base"
        HEAD = "head"

    bisect = models.ForeignKey(Bisect, on_delete=models.CASCADE, related_name="steps")
    position = models.PositiveIntegerField(help_text="0: the good end; A/B: 0 base, 1 head")
    side = models.CharField(max_length=10, choices=Side.choices, blank=True, default="")
    sha = models.CharField(max_length=64)
    subject = models.CharField(max_length=500, blank=True)
    author = models.CharField(max_length=255, blank=True)
    committed_at = models.CharField(max_length=40, blank=True)
    verdict = models.CharField(max_length=20, blank=True,
                               help_text="good, bad or skipped (a bisect's)")
    failure = models.TextField(blank=True, help_text="why it could not be built or run, with "
                                                     "the log's tail")
    rounds = models.JSONField(
        default=list, blank=True,
        help_text="one entry per round: {upload, values: {series label: [repetitions]}}")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["bisect", "position"]
        constraints = [models.UniqueConstraint(fields=["bisect", "position"],
                                               name="one_step_per_position")]

    def __str__(self) -> str:
        return f"{self.bisect_id}@{self.position} {self.sha[:12]}"


def describe(bisect: Bisect, steps: bool = True) -> dict:
    """A bisect as the API and `bench bisect --json` show it; `steps=False`: without its
    steps (the list's items)."""
    shown = []
    for step in bisect.steps.all() if steps else ():
        entry = {"position": step.position, "sha": step.sha, "subject": step.subject,
                 "verdict": step.verdict, "rounds": len(step.rounds)}
        if bisect.kind == Bisect.Kind.AB:
            entry["side"] = step.side
            entry["values"] = {name: [v for r in step.rounds for v in r["values"].get(name, [])]
                               for name in dict.fromkeys(n for r in step.rounds
                                                         for n in r["values"])}
        else:
            tracked = f"{bisect.cells[0]['key']} · {bisect.metric}"
            entry["values"] = [v for r in step.rounds for v in r["values"].get(tracked, [])]
        if step.failure:
            entry["failure"] = step.failure
        shown.append(entry)
    described = {
        "id": bisect.pk, "kind": bisect.kind, "url": bisect.get_absolute_url(),
        "state": bisect.state, "progress": bisect.progress, "culprit_sha": bisect.culprit_sha,
        "outcome": bisect.outcome, "source": bisect.source.name, "repo": bisect.source.repo,
        "head_source": bisect.head_source.name if bisect.head_source else None,
        "regression": bisect.regression_id, "confirms": bisect.confirms,
        "spec_name": bisect.spec_name,
        "family": bisect.family, "cells": [cell["key"] for cell in bisect.cells],
        "metric": bisect.metric, "good_ref": bisect.good_ref, "bad_ref": bisect.bad_ref,
        "good_sha": bisect.good_sha, "bad_sha": bisect.bad_sha, "branch": bisect.branch,
        "queue": bisect.queue, "commits_in_range": max(len(bisect.commits) - 1, 0),
        "attempts": bisect.attempts, "created_at": bisect.created_at.isoformat(),
        "enqueued_at": bisect.enqueued_at.isoformat() if bisect.enqueued_at else None,
        "started_at": bisect.started_at.isoformat() if bisect.started_at else None,
        "finished_at": bisect.finished_at.isoformat() if bisect.finished_at else None,
    }
    if steps:
        described["steps"] = shown
    return described
