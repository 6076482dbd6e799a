"""A compiled speedup measured in independent builds: the interval holds what changes between
builds, and builds that disagree beyond their intervals make the speedup unstable."""

import statistics

from runner.engine.build_spread import BuildSpread, spread_metric
from runner.engine.paired import PairedTiming


def build(*ratios: float, stopped: str = "ci") -> PairedTiming:
    return PairedTiming((1.0,) * 4 * len(ratios), (1.0,) * 4 * len(ratios), ratios,
                        target=0.05, stopped=stopped)


STEADY = (0.99, 1.0, 1.0, 1.01, 1.0, 1.0, 0.995, 1.005)  # CI 0.99-1.01 (±1%)


def scaled(ratios: tuple[float, ...], by: float) -> PairedTiming:
    return build(*(ratio * by for ratio in ratios))


def test_agreeing_builds_keep_a_narrow_interval():
    spread = BuildSpread((scaled(STEADY, 0.5), scaled(STEADY, 0.502)))
    low, high = spread.ci
    assert (low, high) == (0.99 * 0.5, 1.01 * 0.502)
    assert (high - low) / 2 / spread.speedup < 0.02
    assert not spread.disagree and not spread.unstable
    assert spread.disagreement("compiled") is None
    assert spread.speedup == statistics.median(spread.ratios) and spread.pairs == 16


def test_a_between_build_offset_widens_the_interval_and_marks_the_speedup_unstable():
    """The H100 cell that read 0.279x and 0.505x minutes apart, each with a tight CI."""
    first, second = scaled(STEADY, 0.279), scaled(STEADY, 0.505)
    assert not first.unstable and not second.unstable  # each alone looks fine
    spread = BuildSpread((first, second))
    assert spread.ci == (first.ci[0], second.ci[1])  # holds both builds' readings
    assert spread.disagree and spread.unstable
    # the pooled median, between them: no single build's number, hence unstable
    assert spread.speedup == (max(first.ratios) + min(second.ratios)) / 2
    assert spread.disagreement("compiled") == (
        "compiled builds disagree: 0.279x (0.276-0.282) vs 0.505x (0.500-0.510); "
        "the interval holds them all, the cell is unstable")


def test_overlapping_builds_widen_the_interval_without_disagreeing():
    first, second = scaled(STEADY, 1.0), scaled(STEADY, 1.015)
    spread = BuildSpread((first, second))
    assert spread.ci == (first.ci[0], second.ci[1])
    assert spread.ci[1] - spread.ci[0] > first.ci[1] - first.ci[0]
    assert not spread.disagree and not spread.unstable


def test_a_build_without_an_interval_leaves_the_speedup_without_one():
    spread = BuildSpread((scaled(STEADY, 1.0), build(1.0, stopped="cell_budget")))
    assert spread.ci is None and spread.unstable and not spread.disagree


def test_fewer_builds_than_planned_leave_the_speedup_unstable_and_say_how_many():
    """One build's interval holds no spread between builds: on an H200 one build of a float8
    cell read 1.361x [1.354, 1.368], two builds in another process 1.318x and 1.334x."""
    one = scaled(STEADY, 1.361)
    short = BuildSpread((one,), planned=2)
    assert short.short and short.unstable and not short.disagree
    assert short.ci == one.ci and short.summary()["builds_planned"] == 2
    full = BuildSpread((one, scaled(STEADY, 1.362)), planned=2)
    assert not full.short and not full.unstable and "builds_planned" not in full.summary()
    assert not BuildSpread((one,)).short  # none planned: as many as measured


def test_the_record_carries_each_build_and_the_combined_interval():
    first, second = scaled(STEADY, 0.279), scaled(STEADY, 0.505)
    metric = spread_metric("Fwd Speedup (x)", BuildSpread((first, second)), compiled=True)
    info = metric["extra_info"]
    assert metric["benchmark_values"] == [*first.ratios, *second.ratios]
    assert statistics.median(metric["benchmark_values"]) == info["speedup"]
    assert (info["ci_low"], info["ci_high"]) == (first.ci[0], second.ci[1])
    assert info["unstable"] is True and info["builds_disagree"] is True
    assert info["pairs"] == 16 and info["stopped_by"] == "ci" and info["compiled"] is True
    assert info["builds"] == [
        {"speedup": b.speedup, "ci_low": b.ci[0], "ci_high": b.ci[1], "pairs": 8,
         "stopped_by": "ci"} for b in (first, second)]


def test_an_interval_over_builds_is_never_narrower_than_the_resolution():
    """The H200 A/A cell at 1024x4096x4096: two builds both a little above 1.00, each with a
    tight interval; the hull alone missed 1.00, the resolution holds it."""
    first, second = build(*(1.0055 + 0.0002 * i for i in range(-3, 5))), \
        build(*(1.0023 + 0.0002 * i for i in range(-3, 5)))
    hull = BuildSpread((first, second))
    assert hull.ci[0] > 1.0 and hull.disagree and hull.unstable
    resolved = BuildSpread((first, second), resolution=0.005)
    low, high = resolved.ci
    assert low == resolved.speedup * 0.995 and high == max(second.ci[1], first.ci[1],
                                                           resolved.speedup * 1.005)
    assert low <= 1.0 <= high
    assert not resolved.disagree and not resolved.unstable  # 0.3 % apart: within resolution


def test_builds_further_apart_than_the_resolution_still_disagree():
    first, second = scaled(STEADY, 0.8), scaled(STEADY, 0.9)
    spread = BuildSpread((first, second), resolution=0.005)
    assert spread.disagree and spread.unstable
    assert spread.ci == (first.ci[0], second.ci[1])  # wider than the resolution already


def test_a_cells_builds_are_combined_with_its_settings_resolution():
    from runner.engine.timing_data import TimingSettings
    from runner.quant.cells import QuantCell
    from runner.quant.results import CellResult
    from runner.quant.shapes import Shape

    cell = QuantCell("t", "baseline", None, Shape("custom", 16, 256, 256), "linear",
                     "bfloat16", "cuda", "default", "results/t")
    builds = [scaled(STEADY, 1.0), scaled(STEADY, 1.001)]
    result = CellResult(cell, "ok", compiled=builds[0], builds=builds,
                        settings=TimingSettings(resolution=0.03))
    assert result.headline.resolution == 0.03
    assert result.headline.ci[0] == result.headline.speedup * 0.97
