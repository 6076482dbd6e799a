"""Commit comparison: `compare_commits` and `GET /api/v3/compare`, judged against each
series' own default-branch history."""

import io

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection, transaction

from benchsite.comparison import judge
from benchsite.comparison.compare import CannotCompare, resolve
from benchsite.regressions.comparisons import compare_commits
from benchsite.regressions.models import DetectionSettings
from tests.regressions.factory import SPEEDUP, TIME, levels, record, sha, upload

pytestmark = pytest.mark.django_db
MEMORY = ("Allocated Memory (MB)", "MB")


@pytest.fixture
def two_commits():
    """Two commits and no history: repetitions decide where there are 4+ a side."""
    base = [
        record("slower", [1.0, 1.01, 0.99, 1.0, 1.0]),
        record("faster", [1.0, 1.01, 0.99, 1.0]),
        record("same", [1.0, 1.01, 0.99]),
        record("noisy", [0.5, 1.0, 1.5, 2.0, 0.8]),
        record("memory", [100.0], MEMORY),
        record("speedup", [2.0], SPEEDUP),
        record("widgets", [10.0, 10.1, 9.9, 10.0], ("widgets", "")),
        record("only-base", [1.0]),
    ]
    head = [
        record("slower", [1.3, 1.31, 1.29, 1.3, 1.3]),
        record("faster", [0.7, 0.71, 0.69, 0.7]),
        record("same", [1.01, 1.02, 1.0]),
        record("noisy", [0.6, 1.2, 1.6, 2.1, 0.9]),  # median +20 %, within the noise
        record("memory", [115.0], MEMORY),  # +15 %: memory may move 20 %
        record("speedup", [1.8], SPEEDUP),  # -10 %, one repetition and no history
        record("widgets", [12.0, 12.1, 11.9, 12.0], ("widgets", "")),
        record("only-head", [1.0]),
    ]
    upload(1, base)
    upload(2, head)
    upload(3, [record("slower", [5.0])])  # another commit: not compared


def test_without_history_repetitions_decide_or_it_is_insufficient_data(
        two_commits, django_assert_max_num_queries):
    DetectionSettings.load()  # made on first use
    # settings (3), sha checks (4), results, their runs, stored baselines, history, changes,
    # directions, the runs' environments: a fixed number, never one per series
    with django_assert_max_num_queries(14):
        comparison = compare_commits("pytorch/ao", sha(1), sha(2))
    state = {row.model: row.state for row in comparison.rows}
    assert state == {
        "slower": "regression", "faster": "improvement", "widgets": "changed",
        "noisy": "noisy", "speedup": "insufficient_data", "only-head": "new",
        "only-base": "missing", "same": "unchanged", "memory": "unchanged"}
    slower = comparison.rows[0]
    assert (slower.model, slower.base, slower.head, slower.direction) == (
        "slower", 1.0, 1.3, "lower")
    assert slower.change == pytest.approx(0.3) and slower.mw_p_value < 0.05
    assert "Mann-Whitney" in slower.rule and "no history" in slower.rule
    speedup = next(row for row in comparison.rows if row.model == "speedup")
    assert "1 history points (needs 5)" in speedup.rule or "history points" in speedup.rule
    assert comparison.verdict == "regression"
    assert comparison.counts == {"regression": 1, "improvement": 1, "changed": 1, "noisy": 1,
                                 "insufficient_data": 1, "new": 1, "missing": 1,
                                 "unchanged": 2}


def history_of(models: dict[str, list[list[float]]], nights: int, **options):
    for night in range(nights):
        upload(night, [record(model, values[night], **options)
                       for model, values in models.items()])


def test_history_judges_the_change_against_the_series_own_noise():
    nights = 40
    quiet = levels(nights, noise=0.01, repetitions=1, seed=1)
    stepped = levels(nights, step_at=39, step=0.12, noise=0.01, repetitions=1, seed=2)
    shaky = levels(nights, noise=0.06, repetitions=1, seed=3)
    shaky[39] = [shaky[38][0] * 1.08]  # +8 %: past the 5 % tolerance, inside its noise
    history_of({"quiet": quiet, "stepped": stepped, "shaky": shaky}, nights)
    rows = {row.model: row for row in compare_commits("pytorch/ao", sha(38), sha(39)).rows}
    assert rows["stepped"].state == "regression"
    assert "from the level" in rows["stepped"].rule and rows["stepped"].history == 39
    assert rows["quiet"].state == "unchanged" and "tolerance" in rows["quiet"].rule
    assert rows["shaky"].state in ("noisy", "unchanged")
    assert rows["shaky"].noise > 0.03
    # The step is a night old: the next night is judged from the base, not the old level.
    upload(40, [record("stepped", [stepped[39][0] * 1.005])])
    after = compare_commits("pytorch/ao", sha(39), sha(40), model="stepped").rows[0]
    assert after.state == "unchanged", after.rule


def test_two_quiet_nights_of_many_series_pass_and_a_12_percent_step_fails():
    nights, count = 35, 60
    histories = {f"m{n}": levels(nights, noise=0.02, repetitions=1, seed=n)
                 for n in range(count)}
    history_of(histories, nights)
    quiet = compare_commits("pytorch/ao", sha(32), sha(33))
    assert quiet.verdict == "unchanged", [(r.model, r.rule) for r in quiet.rows[:3]]
    upload(35, [record(model, [2.0 * 1.12 if model == "m7" else values[-1][0]])
                for model, values in histories.items()])  # (the series' level is 2.0)
    stepped = compare_commits("pytorch/ao", sha(34), sha(35))
    assert stepped.verdict == "regression", [
        (r.model, r.state, r.rule) for r in stepped.rows if r.model == "m7"]
    assert [row.model for row in stepped.rows if row.state == "regression"] == ["m7"]


def test_runs_of_the_head_together_confirm_a_change_one_run_leaves_in_the_noise():
    # An 8 % step in one series of 100 at 2 % noise: one run of the head is within the
    # noise of 100 series compared; three runs of it know its value sqrt(3) times better.
    nights, count = 40, 100
    histories = {f"m{n}": levels(nights, noise=0.02, repetitions=1, seed=n)
                 for n in range(count)}
    history_of(histories, nights)
    head = "c" * 40

    def run(job: int):
        upload(100, [record(model, [2.0 * (1.08 if model == "m7" else 1.0)])
                     for model in histories], branch="pr/1", head_sha=head, job=job)

    def m7():
        return next(row for row in compare_commits("pytorch/ao", sha(nights - 1), head).rows
                    if row.model == "m7")

    run(0)
    once = m7()
    assert once.state == "noisy" and "within the noise of 100 series" in once.rule
    run(1)
    run(2)
    thrice = m7()
    assert thrice.state == "regression" and "over 3 runs" in thrice.rule, thrice.rule


def test_pull_request_runs_are_never_history():
    nights = 20
    history_of({"layer": levels(nights, noise=0.005, repetitions=1)}, nights)
    for night in range(3):  # a PR branch's runs, far off the main level
        upload(100 + night, [record("layer", [9.0])], branch="pr/123",
               head_sha=f"{night:040x}")
    upload(200, [record("layer", [2.0 * 1.2])], branch="pr/123", head_sha="e" * 40)
    row = compare_commits("pytorch/ao", sha(nights - 1), "e" * 40).rows[0]
    assert row.history == nights and row.level == pytest.approx(2.0, rel=0.02)
    assert row.state == "regression"


def test_false_discovery_control_holds_weak_changes_among_many():
    rules = judge.Rules(tolerance=0.05)
    history = np.exp(np.random.default_rng(0).normal(0, 0.03, 60))
    noise = judge.baseline(history).noise
    head = float(np.median(history)) * np.exp(3.0 * noise * np.sqrt(1 + np.pi / 120))
    weak = judge.judge([1.0], [head], judge.baseline(history), "higher", rules)
    assert weak.state == "improvement" and 0.001 < weak.p_value < 0.01
    quiet = [judge.judge([1.0], [1.0], judge.baseline(history), "higher", rules)
             for _ in range(200)]
    held = judge.control([weak, *quiet], 0.005)
    assert held[0].state == "noisy" and "within the noise of 201 series" in held[0].rule


def test_unstable_measurements_are_noisy_not_regressions():
    rules = judge.Rules(tolerance=0.05)
    verdict = judge.judge([1.0], [0.8], judge.baseline(np.ones(20)), "higher", rules,
                          unstable=True)
    assert verdict.state == "noisy" and "unstable" in verdict.rule


def test_shas_resolve_from_unique_prefixes_and_refuse_by_name(two_commits):
    assert resolve("pytorch/ao", sha(1)[:8]) == sha(1)
    with pytest.raises(CannotCompare, match="too short") as short:
        resolve("pytorch/ao", sha(1)[:4])
    assert short.value.reason == "short_sha"
    upload(7, [record("x", [1.0])], head_sha=sha(1)[:10] + "0" * 30)
    with pytest.raises(CannotCompare, match="prefix of 2 commits") as ambiguous:
        resolve("pytorch/ao", sha(1)[:8])
    assert ambiguous.value.reason == "ambiguous_sha"
    with pytest.raises(CannotCompare, match="no results of pytorch/ao") as unknown:
        resolve("pytorch/ao", "f" * 40)
    assert unknown.value.reason == "unknown_sha"
    with pytest.raises(CannotCompare, match="did you mean pytorch/ao") as repo:
        resolve("pytorch/a0", sha(1))
    assert repo.value.reason == "unknown_repo"


def test_filters_narrow_the_series_and_the_verdict_follows(two_commits):
    faster = compare_commits("pytorch/ao", sha(1), sha(2), metric=TIME[0])
    assert {row.metric for row in faster.rows} == {TIME[0]}
    assert compare_commits("pytorch/ao", sha(1), sha(1)).verdict == "unchanged"
    assert compare_commits("pytorch/ao", sha(1), sha(3), model="only-base").verdict == \
        "no common results"
    with pytest.raises(ValueError, match="unknown filter.*'models'"):
        compare_commits("pytorch/ao", sha(1), sha(2), models="x")
    assert compare_commits("pytorch/ao", sha(1), sha(2), metric=SPEEDUP[0]).verdict == \
        "unchanged"


def test_the_api_answers_json_and_names_bad_parameters(two_commits, api):
    answer = api.get("/api/v3/compare", {"repo": "pytorch/ao", "base": sha(1)[:7],
                                         "head": sha(2), "model": "slower"})
    assert answer.status_code == 200
    body = answer.json()
    assert (body["base"], body["branches"]) == (sha(1), ["main"])
    assert (body["verdict"], body["counts"]["regression"]) == ("regression", 1)
    row = body["rows"][0]
    assert (row["model"], row["state"]) == ("slower", "regression") and row["rule"]

    refused = api.get("/api/v3/compare", {"repo": "pytorch/ao", "head": sha(2), "models": "x"})
    assert refused.status_code == 400
    errors = refused.json()["errors"]
    assert "base: required" in errors
    assert any(error.startswith("models: unknown parameter") for error in errors)

    unknown = api.get("/api/v3/compare", {"repo": "pytorch/ao", "base": "abc", "head": sha(2)})
    assert unknown.status_code == 404
    assert unknown.json()["cannot_compare"] == "short_sha"


def _rows(comparison):
    return [(row.model, row.state, row.level, row.noise, row.history, row.p_value)
            for row in comparison.rows]


@pytest.mark.django_db(transaction=True)
def test_stored_baselines_give_the_verdicts_the_history_gives():
    from benchsite.comparison.models import SeriesBaseline

    nights = 30
    history_of({"quiet": levels(nights, noise=0.01, repetitions=1, seed=1),
                "stepped": levels(nights, step_at=29, step=0.12, noise=0.01, repetitions=1,
                                  seed=2)}, nights)
    # Detection on each upload stored the baseline of each series' newest point.
    stored = SeriesBaseline.objects.filter(run__head_sha=sha(28))
    assert stored.count() == 2 and stored.filter(points=29).count() == 2
    with_stored = compare_commits("pytorch/ao", sha(28), sha(29))
    assert {row.model: row.state for row in with_stored.rows} == {
        "stepped": "regression", "quiet": "unchanged"}
    SeriesBaseline.objects.all().delete()
    assert _rows(compare_commits("pytorch/ao", sha(28), sha(29))) == _rows(with_stored)
    # An older base: `manage.py baselines` stores each point's, from the lookback before it.
    from_history = compare_commits("pytorch/ao", sha(10), sha(29))
    call_command("baselines", "--points", "25", stdout=io.StringIO())
    assert SeriesBaseline.objects.count() == 2 * 25
    if connection.vendor == "postgresql":
        # Written run by run (a comparison reads a commit's baselines by run), then analysed.
        table = SeriesBaseline._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT run_id FROM {table} ORDER BY ctid")
            runs = [run for (run,) in cursor.fetchall()]
            cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [table])
            assert cursor.fetchone()[0] == 2 * 25
        assert runs == sorted(runs) and len(set(runs)) == 25
    older = SeriesBaseline.objects.get(run__head_sha=sha(10), series__model="quiet")
    assert (older.points, older.since) == (11, 11)
    assert _rows(compare_commits("pytorch/ao", sha(10), sha(29))) == _rows(from_history)


def _index_columns(table: str) -> list[list[str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT array_agg(a.attname ORDER BY k.n) FROM pg_index i "
                       "CROSS JOIN unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) "
                       "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
                       "WHERE i.indrelid = %s::regclass GROUP BY i.indexrelid", [table])
        return sorted(columns for (columns,) in cursor.fetchall())


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's indexes and plans")
@pytest.mark.django_db(transaction=True)
def test_a_commits_baselines_are_found_by_run_through_the_unique_index():
    from benchsite.comparison import stored_baselines
    from benchsite.comparison.models import SeriesBaseline
    from tests.migrating import migrate, migrate_to_latest

    table = SeriesBaseline._meta.db_table
    history_of({"layer": levels(12, noise=0.01, repetitions=1)}, 12)
    # The run's own index (8 bytes a baseline, about one a result) went: migration 0002.
    assert _index_columns(table) == [["id"], ["run_id", "series_id"], ["series_id"]]
    runs = list(SeriesBaseline.objects.values_list("run_id", flat=True)[:2])
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a dozen rows: a scan is cheaper
        plan = stored_baselines.of_runs(runs).explain()
    assert "one_baseline_per_run_and_series" in plan, plan
    assert len(stored_baselines.stored(
        SeriesBaseline.objects.values_list("series_id", flat=True), runs)) == 1
    try:
        migrate([("comparison", "0001_initial")])
        assert ["run_id"] in _index_columns(table)
    finally:
        migrate_to_latest()
    assert ["run_id"] not in _index_columns(table)


@pytest.mark.django_db(transaction=True)
def test_a_stored_baseline_is_what_the_comparison_reads():
    from benchsite.comparison.models import SeriesBaseline

    nights = 12
    history_of({"layer": levels(nights, noise=0.01, repetitions=1)}, nights)
    SeriesBaseline.objects.filter(run__head_sha=sha(10)).update(level=1.0)
    row = compare_commits("pytorch/ao", sha(10), sha(11)).rows[0]
    assert row.level == pytest.approx(2.0, rel=0.05)  # the base moved off that level
    assert "moved at or before the base" in row.rule


def test_a_base_within_one_runs_noise_is_not_taken_for_a_move_of_the_series():
    # The base is one run, 2.2 noise units off the level on the head's side; the head is
    # three runs 8 % up. The base is within its own noise (3 units), so the head is judged
    # from the level, not from the base (three runs' smaller noise is the head's, not its).
    history = judge.Baseline(level=1.0, noise=0.02, freedom=50.0, points=60, since=60)
    rules = judge.Rules(tolerance=0.05)
    base = [float(np.exp(2.2 * 0.02))]
    verdict = judge.judge(base, [1.08] * 3, history, "lower", rules, head_runs=3)
    assert verdict.state == "regression" and "moved" not in verdict.rule, verdict.rule
    assert "over 3 runs" in verdict.rule
    moved = judge.judge([float(np.exp(3.5 * 0.02))], [1.08] * 3, history, "lower", rules,
                        head_runs=3)
    assert "moved at or before the base" in moved.rule


def test_a_value_going_to_or_from_0_is_a_change_whatever_the_noise():
    # The HUD records a model that fails as speedup 0: with 60 points of history that is a
    # regression, not "insufficient data".
    history = judge.Baseline(level=1.1, noise=0.02, freedom=50.0, points=60, since=60)
    rules = judge.Rules(tolerance=0.05)
    failed = judge.judge([1.1], [0.0], history, "higher", rules, unstable=True)
    assert failed.state == "regression" and "to 0 (a failed run reports 0)" in failed.rule
    assert failed.p_value is None  # certain: not among the series the FDR weighs
    assert judge.judge([0.0], [1.1], history, "higher", rules).state == "improvement"
    assert judge.judge([0.0], [0.0], history, "higher", rules).state == "unchanged"
    # Where lower is better (graph breaks, say), reaching 0 is the better way.
    assert judge.judge([2.0], [0.0], history, "lower", rules).state == "improvement"


def test_pass_fail_outcomes_are_judged_by_what_they_say():
    def side(*texts):
        return [(text, {"pass": True, "fail_accuracy": False}.get(text)) for text in texts]

    broke = judge.outcome(side("pass"), side("fail_accuracy"))
    assert (broke.state, broke.rule) == ("regression",
                                         "pass -> fail_accuracy: a pass became a failure")
    assert judge.outcome(side("fail_accuracy"), side("pass")).state == "improvement"
    assert judge.outcome(side("pass"), side("pass", "fail_accuracy")).state == "regression"
    assert judge.outcome(side("fail_accuracy"), side("fail_accuracy")).state == "unchanged"
    assert "neither a pass nor a failure at the head" in judge.outcome(
        side("pass"), side("skipped")).rule
    assert judge.outcome([], side("pass")).state == "new"
    assert judge.outcome(side("pass"), []).state == "missing"


def test_a_model_that_starts_failing_accuracy_is_a_regression_of_the_comparison():
    def runs(failing: bool) -> list[dict]:
        speedup = record("timm", [0.0 if failing else 1.5], SPEEDUP)
        accuracy = {**record("timm", []), "metric": {
            "name": "accuracy", "benchmark_values": [],
            "extra_info": {"benchmark_values": ["fail_accuracy" if failing else "pass"]}}}
        return [speedup, accuracy, record("other", [1.0])]

    for night in range(12):
        upload(night, runs(failing=night >= 10))
    broke = compare_commits("pytorch/ao", sha(9), sha(10))
    assert broke.verdict == "regression"
    regressed = {row.metric: (row.base, row.head, row.rule) for row in broke.rows
                 if row.state == "regression"}
    assert regressed == {
        SPEEDUP[0]: (1.5, 0.0, "1.5 -> 0: to 0 (a failed run reports 0)"),
        "accuracy": (1.0, 0.0, "pass -> fail_accuracy: a pass became a failure")}
    still = compare_commits("pytorch/ao", sha(10), sha(11))  # failing at both: not this PR's
    assert still.verdict == "unchanged", [(r.metric, r.state, r.rule) for r in still.rows]
