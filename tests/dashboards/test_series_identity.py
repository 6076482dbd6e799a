"""Series identity (issue 30): a page never collapses two series into one or drops one. Every
stored result of a cpu_small-shaped job (two layers per recipe and shape) is on the
quantization page, over its layer choices, and on its run page; every series of a demo
night's runs is a row of its own on the run page."""

import itertools
import re

import orjson
import pytest
from django.core.management import call_command

from benchsite.results.demo import sha
from benchsite.results.ingest import store_upload
from benchsite.results.models import Result, Run
from runner.contract.names import QUANT_BENCHMARK, QuantMetric, quant_model_name
from tests.results.samples import TORCHAO, record

pytestmark = pytest.mark.django_db

NIGHTS = 2
ARCH = "AMD EPYC 7R13 Processor"
JOB_SHA = "cpu-small-1"
RECIPES = ("baseline", "int8wo", "int8dq", "float8wo")  # fixtures/specs/cpu_small.yml
SHAPES = ("256-512-512", "512-1024-1024")
LAYERS = ("linear", "ln_linear_relu")
METRICS = {QuantMetric.SPEEDUP: "speedup", QuantMetric.BASELINE_TIME: "bf16 ms",
           QuantMetric.QUANTIZED_TIME: "quantized ms"}
MEASUREMENTS = {"value", "spread", "target", "string values"}  # the run page's non-identity


def cpu_small_job() -> dict:
    """What `scripts/run`'s job stores, shaped as runner.quant.records writes it; returns
    (recipe, layer, shape, metric) -> value."""
    stored, records = {}, []
    values = itertools.count(1)
    for recipe, shape, layer in itertools.product(RECIPES, SHAPES, LAYERS):
        for metric in METRICS:
            value = float(next(values))
            stored[(recipe, layer, shape, metric)] = value
            cell = record(TORCHAO)
            cell["benchmark"] = {
                "name": QUANT_BENCHMARK, "mode": "inference", "dtype": recipe,
                "extra_info": {"device": "cpu", "arch": ARCH, "torch_compile_mode": "none",
                               "model_type": layer, "shape": list(map(int, shape.split("-"))),
                               "shape_name": "custom", "quantization": recipe,
                               "high_precision_dtype": "torch.bfloat16",
                               "param_set": "cpu_small"}}
            cell["model"] = {**cell["model"], "name": quant_model_name(recipe, shape)}
            cell["metric"] = {"name": metric, "benchmark_values": [value],
                              "extra_info": {"unit": "x" if "Speedup" in metric else "ms"}}
            records.append(cell)
    store_upload(orjson.dumps(records), metadata={
        "repo": "pytorch/ao", "head_branch": "main", "head_sha": JOB_SHA, "workflow_id": 0,
        "run_attempt": 1, "job_id": 1, "name": "cpu_small"}, announce=False)
    return stored


def get_json(client, url):
    response = client.get(url + ("&" if "?" in url else "?") + "format=json")
    assert response.status_code == 200, response.content[:500]
    return response.json()


def table(page, name):
    return next(t for t in page["tables"] if t["name"] == name)


def quant_cells(client, layer=""):
    """(recipe, layer, shape, metric) -> value of the quantization page's cells table."""
    page = get_json(client, f"/quantization/?repo=pytorch/ao&branch=main&arch={ARCH}"
                            f"&sha={JOB_SHA}&compile_mode=none&layer={layer}&page=all")
    assert page["filters"]["layer"] == layer
    cells = table(page, "cells")
    at = {name: cells["columns"].index(name) for name in ("recipe", "shape (M-K-N)")}
    found = {}
    for row in cells["rows"]:
        kind = row[cells["columns"].index("layer")] if "layer" in cells["columns"] else layer
        for metric, title in METRICS.items():
            key = (row[at["recipe"]], kind, row[at["shape (M-K-N)"]], metric)
            assert key not in found, key
            found[key] = row[cells["columns"].index(title)]
    return found, page


def run_rows(client, run):
    """The run page's rows, every page, checked for two rows that look the same."""
    page = get_json(client, f"/runs/{run.pk}/?page=all")
    results = page["tables"][0]
    identity = [i for i, name in enumerate(results["columns"]) if name not in MEASUREMENTS]
    keys = [tuple(row[i] for i in identity) for row in results["rows"]]
    assert len(keys) == run.result_count
    stored = Result.objects.filter(run=run).values("series_id").distinct().count()
    assert len(set(keys)) == stored, [
        k for k in keys if keys.count(k) > 1][:4]  # no two series in one row's clothes
    return results


def test_every_result_of_the_cpu_small_job_is_on_the_quantization_page(client):
    call_command("load_demo", "--nights", str(NIGHTS))
    stored = cpu_small_job()

    everything, page = quant_cells(client)  # the default: every layer
    assert everything == stored
    assert "layer" in table(page, "cells")["columns"]
    geomeans = table(page, "geomean")
    assert geomeans["columns"][:2] == ["recipe", "layer"]
    assert len(geomeans["rows"]) == len(RECIPES) * len(LAYERS)
    assert len(page["figures"][0]["data"][0]["y"]) == len(RECIPES) * len(LAYERS)
    assert ("float8wo", "linear", "256-512-512", QuantMetric.SPEEDUP) in everything

    reached = {}
    for layer in LAYERS:  # each choice shows its own layer, and only it
        cells, page = quant_cells(client, layer)
        assert "layer" not in table(page, "cells")["columns"]
        assert {key[1] for key in cells} == {layer}
        reached.update(cells)
    assert reached == stored

    response = client.get(f"/quantization/?repo=pytorch/ao&branch=main&arch={ARCH}"
                          f"&sha={JOB_SHA}&compile_mode=none&layer=conv&format=json")
    assert response.status_code == 400  # a layer the commit lacks is named, not ignored


def test_every_series_of_a_run_is_a_row_of_its_own(client):
    call_command("load_demo", "--nights", str(NIGHTS))
    cpu_small_job()

    job = Run.objects.get(head_sha=JOB_SHA)
    results = run_rows(client, job)
    assert "benchmark.model_type" in results["columns"]
    assert "arch" not in results["columns"]  # the same for every row: hidden

    night = Run.objects.filter(head_sha=sha(NIGHTS - 1))
    assert {run.repo for run in night} >= {"pytorch/ao", "vllm-project/vllm"}
    for run in night:
        run_rows(client, run)
    vllm = run_rows(client, night.filter(repo="vllm-project/vllm").first())
    assert any("tensor_parallel_size" in column for column in vllm["columns"])


def test_a_cells_explorer_link_shows_that_layers_series_only(client):
    """The link from a cell's shape opens the explorer on that recipe, shape and layer: its
    three metrics, not the other layer's under the same model name; lines named apart."""
    call_command("load_demo", "--nights", str(NIGHTS))
    stored = cpu_small_job()
    html = client.get(f"/quantization/?repo=pytorch/ao&branch=main&arch={ARCH}&sha={JOB_SHA}"
                      "&compile_mode=none&page=all").content.decode()
    for layer in LAYERS:
        recipe, shape = "float8wo", "256-512-512"
        extra = f"extra=benchmark.model_type%3D{layer}"
        [link] = {href for href in re.findall(r'href="(/explorer/\?[^"]+)"', html)
                  if f"model={quant_model_name(recipe, shape)}&" in href.replace("&amp;", "&")
                  and extra in href}
        page = get_json(client, link.replace("&amp;", "&"))
        rows = table(page, "series")["rows"]
        assert sorted(row[1] for row in rows) == sorted(METRICS), rows
        latest = {row[1]: row[2] for row in rows}
        assert latest == {metric: stored[(recipe, layer, shape, metric)] for metric in METRICS}
    # Without the layer, the model's six series: lines named by their layer, none alike.
    page = get_json(client, f"/explorer/?repo=pytorch/ao&benchmark={QUANT_BENCHMARK}"
                            f"&arch={ARCH}&model={quant_model_name('float8wo', '256-512-512')}")
    names = [(row[0], row[1]) for row in table(page, "series")["rows"]]
    assert len(names) == len(set(names)) == len(LAYERS) * len(METRICS), names
    assert {row[0] for row in table(page, "series")["rows"]} == set(LAYERS)
    refused = client.get(f"/explorer/?repo=pytorch/ao&benchmark={QUANT_BENCHMARK}"
                         "&extra=model_type&format=json")
    assert refused.status_code == 400 and "key=value" in refused.content.decode()
