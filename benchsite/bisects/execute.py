"""Running a claimed bisect or try job to its end on this worker, and recording its outcome:
the culprit written on its regression and told to the regression's targets."""

from __future__ import annotations

import contextlib
import math
from statistics import median

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from benchsite.bisects import search
from benchsite.bisects.lab import SiteLab
from benchsite.bisects.models import Bisect
from benchsite.bisects.notify import tell_culprit
from benchsite.bisects.signals import bisect_ended
from benchsite.regressions.models import DetectionSettings, RegressionEvent
from runner.sources.git import GitError


def run(bisect: Bisect) -> None:
    lab = SiteLab(bisect)
    try:
        if not bisect.commits:
            resolve(bisect, lab)
        if bisect.kind == Bisect.Kind.AB:
            outcome = run_ab(bisect, lab)
        else:
            outcome = search.bisect(lab, len(bisect.commits) - 1, bisect.worse, search_settings(
                bisect))
    except GitError as error:
        outcome = search.Outcome(search.FAILED, str(error))
    finish(bisect, lab, outcome)


def search_settings(bisect: Bisect) -> search.Settings:
    return search.Settings(alpha=DetectionSettings.load().compare_significance,
                           max_rounds=settings.BENCH_BISECT_MAX_ROUNDS,
                           min_change=bisect.min_change)


def resolve(bisect: Bisect, lab: SiteLab) -> None:
    """The refs as shas and, for a bisect, the commits of its range (first-parent)."""
    lab.say("fetching and resolving the commits")
    good = lab.workspace(0)
    with good.locked():
        bisect.good_sha = good.repo.resolve(bisect.good_ref)
        if bisect.kind == Bisect.Kind.AB:
            head = lab.workspace(1)
            with head.locked() if head is not good else contextlib.nullcontext():
                bisect.bad_sha = head.repo.resolve(bisect.bad_ref)
            bisect.commits = [bisect.good_sha, bisect.bad_sha]
        else:
            bisect.bad_sha = good.repo.resolve(bisect.bad_ref)
            between = good.repo.between(bisect.good_sha, bisect.bad_sha)
            if not between:
                raise GitError(f"{bisect.source.location}: no commits between "
                               f"{bisect.good_ref} and {bisect.bad_ref}")
            bisect.commits = [bisect.good_sha, *between]
    bisect.save(update_fields=["good_sha", "bad_sha", "commits"])


def run_ab(bisect: Bisect, lab: SiteLab) -> search.Outcome:
    """BENCH_BISECT_AB_ROUNDS rounds of base and head, interleaved (ABBA...); every series'
    change from base to head is judged when it ends (`ab_series`)."""
    try:
        for number in range(settings.BENCH_BISECT_AB_ROUNDS):
            for position in (0, 1) if number % 2 == 0 else (1, 0):
                if len(lab.rounds(position, 1 - position)) <= number:
                    lab.measure(position, 1 - position)
    except search.Skip as error:
        return search.Outcome(search.FAILED, str(error))
    return search.Outcome("finished", f"{settings.BENCH_BISECT_AB_ROUNDS} interleaved rounds "
                                      "of base and head")


def ab_series(lab: SiteLab, alpha: float) -> list[dict]:
    """Each series both sides measured, judged as a bisect judges a comparison (its pairs of
    rounds, `search.paired`): medians, relative change, the p-value that judged it (the
    larger of the repetitions' and the pairs of rounds'; None with too few values),
    significant, and the pairs that judged it and whether they agree. A series with no
    relative change (a base round's median of 0) is left out."""
    names = sorted({name for position in (0, 1) for entry in lab.steps[position].rounds
                    for name in entry["values"]} if len(lab.steps) == 2 else set())
    rows = []
    for name in names:
        base, head = lab.rounds(0, 1, series=name), lab.rounds(1, 0, series=name)
        try:
            pair = search.paired(0, 1, base, head)
        except search.Skip:
            continue
        if not math.isfinite(pair.change):
            continue
        rows.append({"series": name, "base_median": median(v for r in base for v in r),
                     "head_median": median(v for r in head for v in r),
                     "change": pair.change, "p_value": pair.p if pair.tested else None,
                     "significant": pair.differs(alpha), "pairs": pair.rounds,
                     "agree": pair.agree})
    return rows


def commit_item(bisect: Bisect, lab: SiteLab, position: int) -> dict:
    step = lab.steps.get(position)
    sha = bisect.commits[position]
    source = lab.source(position)
    return {"position": position, "sha": sha, "subject": step.subject if step else "",
            "author": step.author if step else "", "url": source.commit_url(sha)}


def finish(bisect: Bisect, lab: SiteLab, outcome: search.Outcome) -> None:
    skipped = [{**commit_item(bisect, lab, p), "failure": lab.steps[p].failure}
               for p in sorted(lab.steps) if lab.steps[p].verdict == "skipped"]
    for position, verdict in outcome.verdicts.items():
        step = lab.steps.get(position)
        if step is not None and step.verdict != verdict:
            step.verdict = verdict
            step.save(update_fields=["verdict", "updated_at"])
    result = {"message": outcome.message, "original_change": outcome.original_change,
              "skipped": skipped,
              "candidates": [{**commit_item(bisect, lab, p),
                              "after": bisect.commits[outcome.after[p]]}
                             for p in outcome.candidates]}
    if outcome.culprit is not None:
        result["culprit"] = {**commit_item(bisect, lab, outcome.culprit),
                             "magnitude": outcome.magnitude, "p_value": outcome.p_value}
    if bisect.kind == Bisect.Kind.AB and outcome.state != search.FAILED:
        alpha = DetectionSettings.load().compare_significance
        result["series"], result["series_rule"] = ab_series(lab, alpha), search.rule(alpha)
    state = "finished" if bisect.kind == Bisect.Kind.AB and outcome.state != search.FAILED \
        else outcome.state
    with transaction.atomic():
        ended = Bisect.objects.filter(pk=bisect.pk, state=Bisect.State.RUNNING).update(
            state=state, outcome=result, progress="",
            culprit_sha=result.get("culprit", {}).get("sha", ""), finished_at=timezone.now())
        if not ended:
            return
        bisect.refresh_from_db()
        if bisect.regression_id and bisect.culprit_sha:
            regression = bisect.regression
            culprit = result["culprit"]
            RegressionEvent.objects.create(
                regression=regression, from_state=regression.state, to_state=regression.state,
                note=f"bisect {bisect.pk}: culprit {culprit['sha'][:12]} "
                     f"\"{culprit['subject']}\" by {culprit['author']}, "
                     f"{culprit['magnitude']:+.1%} (p={culprit['p_value']:.2g})")
        # What follows from it first (a confirmation's verdict; a held alert that names
        # the culprit, and then tells it in place of tell_culprit).
        transaction.on_commit(lambda: bisect_ended.send(sender=Bisect, bisect=bisect))
        transaction.on_commit(lambda: tell_culprit(bisect))
