"""One door for "which way is better": an admin's override of a metric's direction
(`MetricDirection`) is followed by detection, the compare API, the explorer's and the
compilers page's colours and a bisect's search, not only by some of them."""

import pytest

from benchsite.bisects import search
from benchsite.bisects.lab import SiteLab
from benchsite.bisects.models import Bisect, Source
from benchsite.comparison.directions import HIGHER, LOWER, direction_of, directions_for
from benchsite.comparison.models import MetricDirection
from benchsite.regressions.detection import detect_series
from benchsite.results.models import Series
from dashboards.pages import compilers
from runner.contract.names import COMPILERS_BENCHMARK, CompilerMetric
from tests.bisects.test_search import FakeLab, step
from tests.regressions.factory import TIME, levels, record, sha, store_history, upload

pytestmark = pytest.mark.django_db
BENCHMARK = "micro-benchmark api"
METRIC, UNIT = TIME  # lower is better in the contract's table


def override(metric: str = METRIC, better: str = HIGHER, benchmark: str = "") -> None:
    MetricDirection.objects.create(metric=metric, benchmark=benchmark, direction=better)


def test_the_door_puts_an_override_for_the_benchmark_before_one_for_every_benchmark():
    assert direction_of(METRIC, BENCHMARK, UNIT).better == LOWER
    override(better=HIGHER)
    assert direction_of(METRIC, BENCHMARK, UNIT).better == HIGHER
    assert direction_of(METRIC, BENCHMARK, UNIT).rule.startswith("override: ")
    override(better=LOWER, benchmark=BENCHMARK)
    assert direction_of(METRIC, BENCHMARK, UNIT).better == LOWER
    assert direction_of(METRIC, "another benchmark", UNIT).better == HIGHER


def test_detection_and_the_compare_api_follow_an_override(api):
    # The time drops by 30 % from night 25: an improvement by the contract.
    series = store_history({"faster": levels(40, step_at=25, step=-0.3)})["faster"]
    params = {"repo": "pytorch/ao", "base": sha(24), "head": sha(25)}
    [row] = api.get("/api/v3/compare", params).json()["rows"]
    assert (row["direction"], row["state"]) == (LOWER, "improvement")

    override(better=HIGHER)
    assert directions_for([series], {series.pk: UNIT})[series.pk].better == HIGHER
    [found] = detect_series([series.pk], "main")
    assert (found.kind, found.direction) == ("regression", HIGHER)
    assert found.direction_rule.startswith("override: ")
    [row] = api.get("/api/v3/compare", {**params, "fdr": "0.01"}).json()["rows"]
    assert (row["direction"], row["state"]) == (HIGHER, "regression")


def test_the_explorer_colours_a_change_as_an_override_says(client):
    nights = 12
    for night in range(nights):
        value = 1.0 if night < nights - 1 else 0.5  # the latest point halves the time
        upload(night, [record("halved", [value], TIME, benchmark=BENCHMARK)])
    url = "/explorer/"
    params = {"repo": "pytorch/ao", "benchmark": BENCHMARK, "metric": METRIC,
              "start": "2025-10-01", "end": "2025-10-31"}  # the factory's nights
    before = client.get(url, params).content.decode()
    assert 'class="better"' in before and 'class="worse"' not in before
    override(better=HIGHER)
    after = client.get(url, params).content.decode()
    assert 'class="worse"' in after and 'class="better"' not in after
    assert Series.objects.count() == 1


def test_the_compilers_page_colours_a_change_as_an_override_says():
    def scope():
        return compilers.Scope(repo="pytorch/pytorch", benchmark=COMPILERS_BENCHMARK,
                               mode="inference", arch="H100", dtype="amp", base="a", new="b",
                               threshold=0.05, memory_threshold=0.2)

    slower = {"a": 10.0, "b": 20.0}  # the compile time doubles
    assert compilers.base_to_new(scope(), CompilerMetric.COMPILE_TIME, slower)[1] == "worse"
    override(CompilerMetric.COMPILE_TIME, HIGHER)
    assert compilers.base_to_new(scope(), CompilerMetric.COMPILE_TIME, slower)[1] == "better"


def test_a_bisect_searches_in_the_direction_an_override_says():
    source = Source.objects.create(name="demo", location="/nonexistent", repo="demo/pkg")

    def bisect_of(name: str) -> Bisect:
        bisect = Bisect.objects.create(
            kind=Bisect.Kind.BISECT, source=source, spec_name=name, spec_yaml="", family="",
            cells=[{"key": "cell", "cell": {}}], metric="", good_ref="a", bad_ref="b")
        records = [record("m", [1.0, 1.1], TIME, benchmark=BENCHMARK)]
        SiteLab(bisect).choose_metric(records)
        bisect.refresh_from_db()
        return bisect

    # The time goes up 4x at commit 17: worse by the contract, better with the override.
    plain = bisect_of("plain")
    assert (plain.metric, plain.worse) == (METRIC, 1)
    found = search.bisect(FakeLab(step(17)), 24, plain.worse, search.Settings())
    assert (found.state, found.culprit) == (search.CULPRIT, 17)

    override(better=HIGHER)
    overridden = bisect_of("overridden")
    assert overridden.worse == -1
    found = search.bisect(FakeLab(step(17)), 24, overridden.worse, search.Settings())
    assert found.state == search.NOT_REPRODUCED
