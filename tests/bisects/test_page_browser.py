"""The page of a finished bisect in Chromium: the chart of every repetition over the commits
measured with the culprit marked, the culprit's facts and links, the skipped commit's log,
and no browser error (the browser fixtures of tests/conftest.py)."""

from __future__ import annotations

import pytest

from benchsite.bisects import execute
from benchsite.bisects.lab import SiteLab, label
from benchsite.bisects.models import BisectStep
from benchsite.bisects.search import CULPRIT, Outcome
from benchsite.bisects.start import start_spec
from runner.sources import demo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
KEY = "custom/demo_mlp/eager/eval/float32/cpu/bsdefault"


@pytest.fixture
def finished(source, demo_repo, monkeypatch):
    """A bisect of the demo's commits 15..19 as a worker leaves it: 15 and 16 good, 17 the
    culprit (8x slower here), 18 skipped (its build failed), 19 bad."""
    from benchsite.bisects import tasks

    monkeypatch.setattr(tasks.run_bisect, "apply_async", lambda **kwargs: None)  # no worker
    _, shas = demo_repo
    commits = shas[demo.SLOW - 2:demo.SLOW + 3]
    bisect = start_spec(spec_yaml=demo.SPEC, spec_name="demo.yml", source=source,
                        good=commits[0], bad=commits[-1], metric=demo.METRIC, worse=1)
    bisect.state, bisect.commits = "running", commits
    bisect.good_sha, bisect.bad_sha = commits[0], commits[-1]
    bisect.save()
    tracked = label(KEY, demo.METRIC)
    for position, (level, verdict) in enumerate([(0.2, "good"), (0.21, "good"), (1.6, "bad"),
                                                 (None, "skipped"), (1.62, "bad")]):
        rounds = [] if level is None else [
            {"upload": None, "with": 0, "values": {tracked: [level * (1 + i / 100)
                                                             for i in range(6)]}}
            for _ in range(2 if position in (1, 2) else 1)]
        BisectStep.objects.create(
            bisect=bisect, position=position, sha=commits[position], rounds=rounds,
            subject=f"commit <{position}>", author="Demo Author <demo@example.com>",
            verdict="" if verdict == "skipped" else verdict,
            failure="" if level else "does not build: the build command exited with status "
                                     "1\nSyntaxError: '(' was never closed")
        if level is None:
            BisectStep.objects.filter(bisect=bisect, position=position).update(
                verdict="skipped")
    execute.finish(bisect, SiteLab(bisect), Outcome(
        CULPRIT, "+662.0% from its parent (Mann-Whitney p=0.0022), of +710.0% over the range",
        culprit=2, magnitude=6.62, p_value=0.0022, original_change=7.1, worse=1,
        verdicts={0: "good", 1: "good", 2: "bad", 4: "bad"}))
    bisect.refresh_from_db()
    assert bisect.state == "culprit"
    return bisect, commits


def test_the_bisect_page_charts_every_repetition_and_marks_the_culprit(page, finished):
    bisect, commits = finished
    page.goto(bisect.get_absolute_url())
    page.locator(".js-plotly-plot").first.wait_for()
    traces = page.evaluate("() => document.querySelector('.js-plotly-plot').data.map("
                           "t => ({name: t.name, x: t.x, y: t.y}))")
    by_name = {trace["name"]: trace for trace in traces}
    assert set(by_name) == {"repetitions", "median", "culprit"}
    assert len(by_name["repetitions"]["y"]) == 6 * (1 + 2 + 2 + 1)  # every repetition
    assert by_name["median"]["x"] == [f"{p}: {commits[p][:8]}" for p in (0, 1, 2, 4)]
    assert by_name["culprit"]["x"] == [f"2: {commits[2][:8]}"]
    assert page.locator(".js-plotly-plot .main-svg").count() >= 1  # drawn, not only data
    assert page.locator(".js-plotly-plot .legendtext").all_text_contents() == [
        "repetitions", "median", "culprit"]

    assert page.locator("#bisect-state").inner_text() == "Culprit"
    culprit = page.locator("#culprit")
    assert commits[2] in culprit.inner_text() and "commit <2>" in culprit.inner_text()
    assert culprit.locator("a").get_attribute("href") == \
        f"https://git.example/demo/commit/{commits[2]}"
    row = page.locator("#steps tr.culprit")
    assert row.count() == 1 and commits[2][:12] in row.inner_text()
    assert page.locator("#steps tr.verdict-skipped").count() == 1
    page.locator("#skipped summary").click()
    assert page.locator("#skipped pre").inner_text().endswith("SyntaxError: '(' was never closed")
    assert "+662.0% from its parent" in page.locator("#outcome").inner_text()
