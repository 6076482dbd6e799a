"""Compilers page: speedups the runner timed paired with eager carry a 95% interval; a change
inside the noise (intervals overlapping, or one unstable) is not coloured as a gain or loss,
past the threshold it is marked "≈" and greyed; the intervals show in each speedup cell's
tooltip and in the values table."""

import html as html_module
import re

import orjson
import pytest

from benchsite.results.ingest import store_upload
from runner.compilers import models, records
from runner.compilers.matrix import Config
from runner.engine.paired import PairedTiming
from runner.engine.run_context import RunContext

CPU = "Test CPU"
CONTEXT = RunContext(cpu_info=CPU, cpu_count=2, mem_gb=8.0, avail_mem_gb=4.0, gpu_info=None,
                     gpu_count=0, gpu_mem_gb=None, avail_gpu_mem_gb=None, gpu_capability=None,
                     torch_version="2.13.0", torch_sha=None, cuda_version=None,
                     torchao_version=None)
BASE, NEW = "d" * 40, "e" * 40
STEADY_2 = (1.97, 2.03) + (2.0,) * 6  # 95% CI 1.97-2.03 (8 pairs: the extremes), ±1.5%
STEADY_205 = (2.02, 2.08) + (2.05,) * 6  # 2.5% faster, CI 2.02-2.08: overlaps STEADY_2
WIDE_16 = (1.2, 2.0) + (1.6,) * 6  # CI 1.20-2.00, ±25%: unstable (target ±2%)
WIDE_188 = (1.5, 2.26) + (1.88,) * 6  # -6% from STEADY_2, CI 1.50-2.26: unstable


def store(sha, ratios_of):
    """aot_eager's records (and eager's) for two models, as `python -m runner compilers`
    writes them; the speedup's pair ratios per model from `ratios_of`."""
    found = []
    for name in ("mlp", "lstm"):
        for backend in ("eager", "aot_eager"):
            config = Config(models.builtin(name), backend, "eval", "float32", "cpu", None, 2, 1,
                            True, False, 60.0, "out")
            line = {"repeat": 2, "iterations_per_run": 1, "verification_code": "PASS",
                    "metrics": {"per_iter_time": [0.01, 0.01], "peak_memory_mb": 10.0}}
            if backend != "eager":
                ratios = ratios_of(name)
                line["metrics"]["compile_time"] = 2.0
                line["metrics"]["paired"] = PairedTiming(
                    (10.0,) * 4 * len(ratios), (5.0,) * 4 * len(ratios), ratios).to_dict()
            found += records.build(config, line, None, CONTEXT)
    store_upload(orjson.dumps(found), metadata={
        "repo": "example/noise", "head_branch": "main", "head_sha": sha,
        "workflow_id": 1, "run_attempt": 1, "job_id": 1, "name": "experiments"})


def cells(page_html, table):
    """{first cell: [(css class, title, text), ...]} of one HTML table's rows."""
    body = page_html.split(f'data-table="{table}"', 1)[1].split("</table>", 1)[0]
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        found = [(css.strip(), html_module.unescape(title or ""),
                  html_module.unescape(re.sub(r"<[^>]+>", "", text)))
                 for title, css, text in re.findall(
                     r'<td (?:title="([^"]*)" )?class="([^"]*)">(.*?)</td>', row, re.S)]
        if found:
            rows[found[0][2]] = found
    return rows


def url(path, base=BASE, new=NEW, **params):
    query = "&".join(f"{key}={value}" for key, value in params.items())
    return f"{path}?repo=example/noise&base={base}&new={new}" + (f"&{query}" if query else "")


@pytest.fixture
def noise_db(db):
    store(BASE, lambda name: STEADY_2)
    store(NEW, lambda name: STEADY_205 if name == "mlp" else (2.5,) * 8)


def test_a_model_whose_speedup_moved_inside_the_noise_is_marked_not_coloured(client, noise_db):
    """At a 1% threshold: mlp 2.00x -> 2.05x (+2.5%) with overlapping intervals is greyed and
    marked; lstm 2.00x -> 2.50x, intervals apart, is green. Each tooltip has both CIs."""
    page = client.get(url("/compilers/models/", threshold=1, backend="aot_eager",
                          suite="builtin")).content.decode()
    rows = cells(page, "models")
    css, title, text = rows["mlp"][1]
    assert (css, text) == ("noise", "≈ 2.00x → 2.05x")
    assert title == (f"base {BASE[:10]}: 95% CI 1.97–2.03, 8 pairs\n"
                     f"new {NEW[:10]}: 95% CI 2.02–2.08, 8 pairs\n"
                     "inside the noise: not coloured")
    css, title, text = rows["lstm"][1]
    assert (css, text) == ("better", "2.00x → 2.50x")
    assert "inside the noise" not in title and "95% CI 2.50–2.50" in title
    assert rows["mlp"][2] == ("", "", "pass → pass")  # other columns carry no tooltip
    assert "carry a 95% CI" in page
    data = client.get(url("/compilers/models/", threshold=1, backend="aot_eager",
                          suite="builtin", format="json")).json()
    assert {row[0]: row[1] for row in data["tables"][0]["rows"]} == {
        "lstm": "2.00x → 2.50x", "mlp": "≈ 2.00x → 2.05x"}


def test_without_the_noise_rule_the_same_change_would_be_coloured(client, db):
    """The control: the same +2.5% from records without intervals (as the HUD's) is green."""
    for sha, value in ((BASE, 2.0), (NEW, 2.05)):
        store(sha, lambda name, value=value: (value,) * 8)
    rows = cells(client.get(url("/compilers/models/", threshold=1, backend="aot_eager",
                                suite="builtin")).content.decode(), "models")
    assert rows["mlp"][1][0] == "better" and rows["mlp"][1][2] == "2.00x → 2.05x"


def test_a_geomean_moved_inside_its_noise_is_greyed_and_the_values_table_lists_the_intervals(
        client, db):
    """-6%, past the 5% threshold, from models whose intervals are wide: the geomean's
    interval (the models' combined, 1.63-2.17) holds the base's, so no red."""
    store(BASE, lambda name: STEADY_2)
    store(NEW, lambda name: WIDE_188)
    page = client.get(url("/compilers/")).content.decode()
    css, title, text = cells(page, "geomean speedup")["aot_eager"][1]
    assert (css, text) == ("noise", "≈ 2.00x → 1.88x")
    assert title == (f"base {BASE[:10]}: 95% CI 1.98–2.02\n"
                     f"new {NEW[:10]}: 95% CI 1.63–2.17\n"
                     "inside the noise: not coloured")
    # the passrate, compile time and memory cells of the same backend keep their rules
    assert cells(page, "passrate")["aot_eager"][1][:2] == ("", "")
    data = client.get(url("/compilers/", format="json")).json()
    values = {table["name"]: table for table in data["tables"]}["values"]
    assert values["columns"][-3:] == ["base 95% CI", "new 95% CI", "within noise"]
    rows = {(row[0], row[1]): row for row in values["rows"]}
    speedup = rows["geomean speedup", "aot_eager"]
    assert speedup[3:] == [2.0, 1.88, -6.0, "95% CI 1.98–2.02", "95% CI 1.63–2.17", True]
    assert rows["mean compile time", "aot_eager"][6:] == [None, None, None]


def test_the_geomean_of_unstable_models_is_judged_by_its_combined_interval(client, db):
    """-20% from models each unstable (CI 1.20-2.00): their geomean's interval (1.33-1.92)
    excludes the base's, so the loss is real and red, as on the quantization page."""
    store(BASE, lambda name: STEADY_2)
    store(NEW, lambda name: WIDE_16)
    css, title, text = cells(client.get(url("/compilers/")).content.decode(),
                             "geomean speedup")["aot_eager"][1]
    assert (css, text) == ("worse", "2.00x → 1.60x") and "inside the noise" not in title


def test_a_clear_change_of_the_geomean_is_still_coloured(client, db):
    store(BASE, lambda name: STEADY_2)
    store(NEW, lambda name: (2.5,) * 8)
    page = client.get(url("/compilers/")).content.decode()
    css, title, text = cells(page, "geomean speedup")["aot_eager"][1]
    assert (css, text) == ("better", "2.00x → 2.50x")
    assert title.startswith(f"base {BASE[:10]}: 95% CI ") and "inside the noise" not in title


def test_one_commit_shows_its_interval_and_greys_an_unstable_speedup(client, db):
    store(NEW, lambda name: WIDE_16 if name == "mlp" else (2.5,) * 8)
    rows = cells(client.get(url("/compilers/models/", base=NEW, backend="aot_eager",
                                suite="builtin")).content.decode(), "models")
    assert rows["mlp"][1] == ("noise", f"new {NEW[:10]}: 95% CI 1.20–2.00, 8 pairs, unstable",
                              "1.60x")
    assert rows["lstm"][1] == ("", f"new {NEW[:10]}: 95% CI 2.50–2.50, 8 pairs", "2.50x")
