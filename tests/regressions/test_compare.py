"""Commit comparison: `compare_commits` and `GET /api/v3/compare`."""

import pytest

from benchsite.regressions.compare import compare_commits
from benchsite.regressions.models import DetectionSettings
from tests.regressions.factory import SPEEDUP, TIME, record, sha, upload

pytestmark = pytest.mark.django_db
MEMORY = ("Allocated Memory (MB)", "MB")


@pytest.fixture
def two_commits():
    base = [
        record("slower", [1.0, 1.01, 0.99, 1.0, 1.0]),
        record("faster", [1.0, 1.01, 0.99, 1.0]),
        record("same", [1.0, 1.01, 0.99]),
        record("noisy", [0.5, 1.0, 1.5, 2.0, 0.8]),
        record("memory", [100.0], MEMORY),
        record("speedup", [2.0], SPEEDUP),
        record("widgets", [10.0], ("widgets", "")),
        record("only-base", [1.0]),
    ]
    head = [
        record("slower", [1.3, 1.31, 1.29, 1.3, 1.3]),
        record("faster", [0.7, 0.71, 0.69, 0.7]),
        record("same", [1.01, 1.02, 1.0]),
        record("noisy", [0.6, 1.2, 1.6, 2.1, 0.9]),  # median +20 %, within the noise
        record("memory", [115.0], MEMORY),  # +15 %: memory may move 20 %
        record("speedup", [1.8], SPEEDUP),  # -10 %: past speedup's 5 %
        record("widgets", [12.0], ("widgets", "")),
        record("only-head", [1.0]),
    ]
    upload(1, base)
    upload(2, head)
    upload(3, [record("slower", [5.0])])  # another commit: not compared


def test_every_series_gets_a_status_and_the_worst_comes_first(two_commits,
                                                               django_assert_max_num_queries):
    DetectionSettings.load()  # made on first use
    with django_assert_max_num_queries(4):  # settings (2), results, direction overrides
        comparison = compare_commits("pytorch/ao", sha(1), sha(2))
    status = {row.model: row.status for row in comparison.rows}
    assert status == {
        "slower": "regressed", "speedup": "regressed", "faster": "improved",
        "widgets": "changed", "only-base": "missing_in_head", "only-head": "missing_in_base",
        "same": "unchanged", "noisy": "unchanged", "memory": "unchanged"}
    assert [row.model for row in comparison.rows[:2]] == ["slower", "speedup"]
    slower = comparison.rows[0]
    assert (slower.base, slower.head, slower.direction) == (1.0, 1.3, "lower")
    assert slower.change == pytest.approx(0.3)
    assert slower.p_value < 0.05 and slower.tolerance == 0.15
    noisy = next(row for row in comparison.rows if row.model == "noisy")
    assert noisy.change == pytest.approx(0.2) and noisy.p_value > 0.05
    assert comparison.verdict == "regressed"
    assert comparison.counts == {"regressed": 2, "improved": 1, "changed": 1,
                                 "missing_in_base": 1, "missing_in_head": 1, "unchanged": 3}


def test_filters_narrow_the_series_and_the_verdict_follows(two_commits):
    faster = compare_commits("pytorch/ao", sha(1), sha(2), metric=TIME[0])
    assert compare_commits("pytorch/ao", sha(1), sha(2), metric=SPEEDUP[0]).verdict == \
        "regressed"
    assert {row.metric for row in faster.rows} == {TIME[0]}
    assert compare_commits("pytorch/ao", sha(1), sha(1)).verdict == "unchanged"
    assert compare_commits("pytorch/ao", sha(1), "f" * 40).verdict == "no common results"
    with pytest.raises(ValueError, match="unknown filter.*'models'"):
        compare_commits("pytorch/ao", sha(1), sha(2), models="x")


def test_the_api_answers_json_and_names_bad_parameters(two_commits, api):
    answer = api.get("/api/v3/compare", {"repo": "pytorch/ao", "base": sha(1), "head": sha(2),
                                         "model": "slower"})
    assert answer.status_code == 200
    body = answer.json()
    assert (body["verdict"], body["counts"]["regressed"]) == ("regressed", 1)
    assert body["rows"][0]["model"] == "slower" and body["rows"][0]["status"] == "regressed"

    refused = api.get("/api/v3/compare", {"repo": "pytorch/ao", "head": sha(2), "models": "x"})
    assert refused.status_code == 400
    errors = refused.json()["errors"]
    assert "base: required" in errors
    assert any(error.startswith("models: unknown parameter") for error in errors)
