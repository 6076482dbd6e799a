"""`manage.py bench demo-bisect` end to end in the embedded mode (in-process, no broker):
the demo repository, its source, nightly jobs measured at their commits, the regression
detection raises from them, and, run again with --bisect, the bisect of that regression to
its culprit, as the README's flow does it."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from benchsite.bisects import demo as demo_bisect
from benchsite.bisects.models import Bisect, Source
from benchsite.jobs.models import Job, JobCell
from benchsite.regressions.models import Regression
from benchsite.results.models import Run
from runner.sources import demo

pytestmark = [pytest.mark.torch, pytest.mark.django_db(transaction=True)]


def test_the_demo_from_nightly_jobs_to_a_regression_and_its_culprit(tmp_path, settings, capsys):
    settings.BENCH_SOURCE_CACHE = str(tmp_path / "sources")
    settings.BENCH_DETECT_ON_UPLOAD = True
    folder = tmp_path / "demo-bisect"
    call_command("bench", "demo-bisect", "--folder", str(folder))
    lines = capsys.readouterr().out.splitlines()
    shas = demo_bisect.shas_of(folder / "repo")
    assert len(shas) == demo.COMMITS and lines[0] == f"demo repository: {folder / 'repo'} " \
        f"({demo.COMMITS} commits)"
    assert (folder / "demo.yml").read_text() == demo.SPEC

    source = Source.objects.get()
    assert (source.name, source.repo, source.mode, source.modules) == (
        "demo", "demo/pkg", "command", "demopkg")
    jobs = Job.objects.order_by("pk")
    assert [job.head_sha for job in jobs] == [shas[n] for n in demo_bisect.NIGHTS]
    assert {(job.status, job.repo, job.head_branch, job.name) for job in jobs} == {
        ("succeeded", "demo/pkg", "main", "demo.yml")}
    assert not JobCell.objects.exclude(status="succeeded").exists()
    assert {run.head_sha for run in Run.objects.filter(repo="demo/pkg")} == {
        shas[n] for n in demo_bisect.NIGHTS}  # each night's results at its own commit

    # (the largest: a busy machine's timing may step and raise a smaller one of its own)
    regression = Regression.objects.filter(series__metric=demo.METRIC,
                                           series__model="demo_mlp").order_by("-magnitude")[0]
    last_good, first_bad = demo.BROKEN - 1, demo.SLOW + 2
    assert (regression.last_good_sha, regression.first_bad_sha) == (shas[last_good],
                                                                    shas[first_bad])
    assert regression.magnitude > 2  # several times slower
    assert regression.confirmation == Regression.Confirmation.CONFIRMED
    assert lines[-2] == f"confirmation: {regression.confirmation_text}"
    assert lines[-3].startswith(f"regression {regression.pk}: demo_mlp abs_latency +")
    assert lines[-3].endswith(
        f"between commit {last_good} {shas[last_good][:12]} (last good) and commit "
        f"{first_bad} {shas[first_bad][:12]} (first bad), {first_bad - last_good} commits to "
        f"bisect ({regression.get_absolute_url()})")
    assert lines[-1] == (f"bisect it: python manage.py bench bisect --regression "
                         f"{regression.pk} --wait")

    # Again, with --bisect: what was made is reused, and the bisect ends with the culprit.
    call_command("bench", "demo-bisect", "--folder", str(folder), "--bisect")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"demo repository: {folder / 'repo'} (there already)"
    assert f"night 0: commit 0 {shas[0][:12]}: job {jobs[0].pk} (measured already)" in lines
    assert Job.objects.count() == len(demo_bisect.NIGHTS)
    assert lines[-1] == f"culprit: {shas[demo.SLOW]}"
    # (its confirmation: on a busy machine another metric may raise, and confirm, one of its own)
    assert Bisect.objects.get(confirms=True, regression=regression).kind == Bisect.Kind.AB
    bisect = Bisect.objects.get(kind=Bisect.Kind.BISECT)
    assert bisect.regression == regression and bisect.state == "culprit"
    assert bisect.cells[0]["key"] == JobCell.objects.first().key
    assert bisect.metric == demo.METRIC and bisect.source == source
    assert "culprit" in regression.events.order_by("-pk").first().note


def test_a_folder_that_is_not_the_demo_is_refused(tmp_path, settings):
    (tmp_path / "repo").mkdir()
    with pytest.raises(CommandError, match="not the demo repository"):
        call_command("bench", "demo-bisect", "--folder", str(tmp_path))
