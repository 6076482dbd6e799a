"""Speedups measured with a 95% interval (runner.paired): cells, changes and the baseline
sanity check inside the noise are shown as such, and records without one as before."""

import json
import re

import pytest
from django.core.management import call_command

from benchsite.results.demo import sha
from benchsite.results.ingest import store_upload
from benchsite.results.models import Run
from dashboards.pages.common import (
    Interval,
    change_class,
    geomean_interval,
    interval_of,
    within_noise,
)
from runner.contract.directions import HIGHER, LOWER
from runner.contract.names import QuantMetric, quant_model_name
from tests.results.samples import TORCHAO, record

H100 = "NVIDIA H100 80GB HBM3"
NEW, BASE = "a" * 40, "b" * 40
SHAPE = "1024-1024-1024"


def speedup(recipe, value, ci=None, unstable=False, pairs=12, head_sha=NEW, shape=SHAPE):
    """A speedup record; with `ci`, as the paired runner writes it."""
    extra = {"unit": "x"}
    if ci is not None:
        extra.update(speedup=value, ci_low=ci[0], ci_high=ci[1], confidence=0.95,
                     pairs=pairs, ci_target=0.02, stopped_by="budget" if unstable else "ci",
                     unstable=unstable)
    return record(TORCHAO, repo="pytorch/ao", head_branch="main", head_sha=head_sha,
                  timestamp=1_760_000_000 if head_sha == NEW else 1_759_000_000,
                  benchmark={**TORCHAO["benchmark"], "dtype": recipe},
                  model={**TORCHAO["model"], "name": quant_model_name(recipe, shape)},
                  metric={"name": QuantMetric.SPEEDUP, "benchmark_values": [value],
                          "target_value": 0.0, "extra_info": extra})


def upload(*records):
    store_upload(json.dumps(list(records)).encode())


def page_json(client, url):
    response = client.get(url + "&format=json")
    assert response.status_code == 200, response.content[:500]
    return response.json()


def table_cells(html, name):
    """{first cell text: [(css class, text), ...]} of the rows of one HTML table."""
    body = html.split(f'data-table="{name}"', 1)[1].split("</table>", 1)[0]
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        cells = [(css.strip(), re.sub(r"<[^>]+>", "", text))
                 for css, text in re.findall(r'<td class="([^"]*)">(.*?)</td>', row, re.S)]
        if cells:
            rows[cells[0][1]] = cells
    return rows


def test_an_interval_is_read_only_from_records_that_carry_one():
    assert interval_of({"unit": "x"}) is None and interval_of(None) is None
    assert interval_of({"ci_low": 0.9, "ci_high": 1.1, "pairs": 8, "unstable": False}) == (
        Interval(0.9, 1.1, 8, False))
    assert interval_of({"ci_low": None, "ci_high": None, "pairs": 3, "unstable": True}) == (
        Interval(None, None, 3, True))
    # an upload's wrong types are unknown, not an error
    assert interval_of({"ci_low": "1", "ci_high": True, "pairs": "8", "unstable": "yes"}) == (
        Interval(None, None, None, False))


def test_a_change_inside_the_noise_is_not_coloured_and_the_direction_still_counts():
    base, overlapping, apart = Interval(1.45, 1.55), Interval(1.52, 1.68), Interval(1.6, 1.7)
    assert within_noise(base, overlapping) and not within_noise(base, apart)
    assert within_noise(Interval(1.6, 1.7, unstable=True), base)
    assert within_noise(None, Interval(None, None, unstable=True))
    assert not within_noise(None, base)  # an older record: compared as before
    assert change_class(0.1, 0.05, HIGHER, noisy=within_noise(base, overlapping)) == ""
    assert change_class(0.1, 0.05, HIGHER, noisy=within_noise(base, apart)) == "better"
    assert change_class(0.1, 0.05, LOWER, noisy=within_noise(base, apart)) == "worse"


def test_the_interval_of_a_geomean_narrows_with_the_cells_it_averages():
    one = geomean_interval([(2.0, Interval(1.9, 2.1))])
    four = geomean_interval([(2.0, Interval(1.9, 2.1))] * 4)
    assert one.low == pytest.approx(1.9, abs=0.01) and one.high == pytest.approx(2.1, abs=0.01)
    assert one.low < four.low < 2.0 < four.high < one.high
    assert geomean_interval([(2.0, None), (3.0, None)]) is None
    assert geomean_interval([(2.0, Interval(1.9, 2.1)), (3.0, None)]).unstable


def test_a_cell_within_the_noise_is_neutral_in_the_heatmap_and_marked(client, db):
    upload(speedup("int8wo", 1.01, ci=(0.97, 1.05)),
           speedup("int8dq", 1.81, ci=(1.02, 2.60), unstable=True),
           speedup("float8wo", 1.5, ci=(1.45, 1.55)),
           speedup("int4wo-128", 1.01))  # an older record: no interval
    heatmap = page_json(client, f"/quantization/?arch={H100}")["figures"][0]["data"][0]
    assert heatmap["y"] == ["float8wo", "int4wo-128", "int8dq", "int8wo"]
    assert heatmap["z"] == [[1.5], [1.01], [1.0], [1.0]]
    assert heatmap["text"] == [["1.50x"], ["1.01x"], ["1.81x?"], ["≈1.01x"]]
    assert heatmap["customdata"][2] == ["1.81x (95% CI 1.02–2.60, 12 pairs, unstable)"]
    assert heatmap["customdata"][1] == ["1.01x"]
    assert "%{customdata}" in heatmap["hovertemplate"]


def test_the_cells_table_has_a_95_ci_column_and_says_unstable(client, db):
    upload(speedup("int8dq", 1.81, ci=(1.02, 2.60), unstable=True),
           speedup("int8wo", 1.5, ci=(1.45, 1.55)), speedup("int4wo-128", 1.2))
    cells = page_json(client, f"/quantization/?arch={H100}")["tables"][1]
    speed = cells["columns"].index("speedup")
    assert cells["columns"][speed + 1] == "95% CI"
    rows = {row[0]: (row[speed], row[speed + 1], row[-1]) for row in cells["rows"]}
    assert rows == {"int8dq": (1.81, "1.02–2.60", "unstable"),
                    "int8wo": (1.5, "1.45–1.55", "ok"), "int4wo-128": (1.2, None, "ok")}


def test_base_vs_new_colours_only_the_changes_outside_the_noise(client, db):
    upload(speedup("int8wo", 1.5, ci=(1.45, 1.55), head_sha=BASE),
           speedup("int8dq", 1.5, ci=(1.48, 1.52), head_sha=BASE),
           speedup("int4wo-128", 1.5, head_sha=BASE))
    upload(speedup("int8wo", 1.6, ci=(1.52, 1.68)),  # +6.7%, intervals overlap
           speedup("int8dq", 1.7, ci=(1.68, 1.72)),  # +13%, intervals apart
           speedup("int4wo-128", 1.7))  # +13%, no intervals: as before
    url = f"/quantization/?arch={H100}&sha={NEW}&base={BASE}&threshold=5"
    html = client.get(url).content.decode()
    for table, column in (("cells", -1), ("geomean", 5)):
        rows = table_cells(html, table)
        assert {recipe: cells[column][0] for recipe, cells in rows.items()} == {
            "int8wo": "", "int8dq": "better", "int4wo-128": "better"}, table
    change = page_json(client, url)["figures"][1]["data"][0]
    assert dict(zip(change["y"], change["text"], strict=True))["int8wo"] == ["≈+6.7%"]
    assert dict(zip(change["y"], change["z"], strict=True)) == {
        "int4wo-128": [13.33], "int8dq": [13.33], "int8wo": [0.0]}


def test_the_sanity_line_reads_ok_when_the_baseline_interval_holds_one(client, db):
    upload(speedup("baseline", 1.0, ci=(0.99, 1.01)), speedup("int8wo", 1.5))
    html = client.get(f"/quantization/?arch={H100}").content.decode()
    assert ('<p class="sanity">Sanity check (baseline vs baseline): 1.00x '
            "(95% CI 0.99–1.01, 12 pairs): ok</p>") in html
    assert 'role="alert"' not in html


def test_the_sanity_line_is_an_alert_when_the_baseline_is_off(client, db):
    upload(speedup("baseline", 1.07, ci=(1.05, 1.09)),
           speedup("baseline", 1.0, ci=(0.98, 1.01), shape="2048-2048-2048"))
    html = client.get(f"/quantization/?arch={H100}").content.decode()
    assert ('<p class="error" role="alert">Sanity check (baseline vs baseline), '
            f"{SHAPE}: 1.07x (95% CI 1.05–1.09, 12 pairs): off by +7.0% — outside its 95% "
            "CI: measurements of this run are suspect</p>") in html
    assert ("Sanity check (baseline vs baseline): 1.00x (95% CI 0.98–1.01, 12 pairs): ok"
            in html)


def test_there_is_no_sanity_line_without_the_baseline_recipe(client, db):
    upload(speedup("int8wo", 1.5, ci=(1.45, 1.55)))
    assert "Sanity check" not in client.get(f"/quantization/?arch={H100}").content.decode()


def test_the_run_page_warns_of_an_off_baseline_and_counts_unstable_speedups(client, db):
    upload(speedup("baseline", 1.07, ci=(1.05, 1.09)),
           speedup("int8dq", 1.81, ci=(1.02, 2.60), unstable=True),
           speedup("int8wo", 1.5, ci=(1.45, 1.55)))
    html = client.get(f"/runs/{Run.objects.get().pk}/").content.decode()
    assert ('<p class="error" role="alert">Sanity check (baseline vs baseline) '
            f"baseline-{SHAPE}, Fwd Speedup (x): 1.07x (95% CI 1.05–1.09, 12 pairs): off by "
            "+7.0%") in html
    assert "<dt>Unstable speedups</dt><dd>1 of 3 " in html


def test_the_run_page_of_a_healthy_run_has_no_warning(client, db):
    upload(speedup("baseline", 1.0, ci=(0.99, 1.01)), speedup("int8wo", 1.5))
    html = client.get(f"/runs/{Run.objects.get().pk}/").content.decode()
    assert 'role="alert"' not in html
    assert "<dt>Unstable speedups</dt><dd>0 of 1 " in html


def test_the_demo_flags_its_bad_night_and_reads_ok_on_the_others(client, db):
    call_command("load_demo", "--nights", "8")
    healthy = client.get(f"/quantization/?arch={H100}&sha={sha(7)}").content.decode()
    assert "Sanity check (baseline vs baseline): " in healthy
    assert "each 95% CI holding 1.00: ok" in healthy and 'role="alert"' not in healthy
    bad = client.get(f"/quantization/?arch={H100}&sha={sha(6)}").content.decode()
    assert bad.count('role="alert">Sanity check') == 20  # every shape: 1.04x
    run = Run.objects.get(head_sha=sha(6), repo="pytorch/ao", arch=H100)
    assert "off by +4.0%" in client.get(f"/runs/{run.pk}/").content.decode()
    cells = page_json(client, f"/quantization/?arch={H100}&sha={sha(7)}")["tables"][1]
    assert all(row[5] for row in cells["rows"])  # every demo speedup has its interval


def test_spread_of_repetitions_is_the_iqr_or_the_half_range_over_the_median():
    from dashboards.pages.common import spread_of, spread_text

    assert spread_of([10, 11, 12, 13, 14]) == pytest.approx(2 / 12)  # IQR 11-13
    assert spread_of([9.0, 11.0]) == pytest.approx(0.1)  # half range 1 over median 10
    assert spread_of([5.0]) is None and spread_of(None) is None and spread_of("x") is None
    assert spread_of([0.0, 0.0, 0.0]) is None  # no relative spread around zero
    assert spread_of([1.0, float("nan"), "2", 3.0]) == pytest.approx(0.5)  # numbers only
    assert spread_text([10, 11, 12, 13, 14], {"unit": "ms"}) == (
        "IQR 16.7% of the median, 5 repetitions")
    assert spread_text([1.8], {"ci_low": 1.02, "ci_high": 2.6, "pairs": 12,
                               "unstable": True}) == "95% CI 1.02–2.60, 12 pairs, unstable"
    assert spread_text([1.0], {}) is None


def test_the_run_page_shows_each_results_spread_and_marks_unstable_ones(client, db):
    timed = record(TORCHAO, repo="pytorch/ao", head_branch="main", head_sha=NEW,
                   timestamp=1_760_000_000,
                   model={**TORCHAO["model"], "name": quant_model_name("int8wo", SHAPE)},
                   metric={"name": QuantMetric.QUANTIZED_TIME,
                           "benchmark_values": [1.0, 1.1, 1.2, 1.3],
                           "target_value": 0.0, "extra_info": {"unit": "ms"}})
    upload(speedup("int8dq", 1.81, ci=(1.02, 2.60), unstable=True), timed)
    run = Run.objects.get()
    table = page_json(client, f"/runs/{run.pk}/?page=1")["tables"][0]
    spread = table["columns"].index("spread")
    metric = table["columns"].index("metric")
    by_metric = {row[metric]: row[spread] for row in table["rows"]}
    assert by_metric == {QuantMetric.SPEEDUP: "95% CI 1.02–2.60, 12 pairs, unstable",
                         QuantMetric.QUANTIZED_TIME: "IQR 13.0% of the median, 4 repetitions"}
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert '<td class="spread noise">95% CI 1.02–2.60, 12 pairs, unstable</td>' in html
