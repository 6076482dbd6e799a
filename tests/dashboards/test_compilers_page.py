"""Compilers page: the HUD's backend x suite summary, base → new, on demo data and on the
experiment runner's own records; the per-model drill-down."""

import orjson
import pytest
from django.core.management import call_command

from benchsite.results.demo import sha
from benchsite.results.ingest import store_upload
from runner.compilers import models, records
from runner.compilers.matrix import Config
from runner.engine.paired import PairedTiming
from runner.engine.run_context import RunContext

H100 = "NVIDIA H100 80GB HBM3"
CPU = "Test CPU"
CONTEXT = RunContext(cpu_info=CPU, cpu_count=2, mem_gb=8.0, avail_mem_gb=4.0, gpu_info=None,
                     gpu_count=0, gpu_mem_gb=None, avail_gpu_mem_gb=None, gpu_capability=None,
                     torch_version="2.13.0", torch_sha=None, cuda_version=None,
                     torchao_version=None)


@pytest.fixture
def demo(db):
    call_command("load_demo", "--nights", "8")


def get_json(client, url):
    response = client.get(url + ("&" if "?" in url else "?") + "format=json")
    assert response.status_code == 200, response.content[:500]
    return response.json()


def test_summary_defaults_to_the_latest_two_commits(client, demo, django_assert_max_num_queries):
    with django_assert_max_num_queries(13):  # the commits' run ids: one
        page = get_json(client, "/compilers/")
    filters = page["filters"]
    assert (filters["repo"], filters["benchmark"]) == ("pytorch/pytorch", "TorchInductor")
    assert (filters["new"], filters["base"]) == (sha(7), sha(6))
    assert (filters["mode"], filters["arch"], filters["dtype"]) == ("inference", H100, "amp")
    tables = {table["name"]: table for table in page["tables"]}
    passrate = tables["passrate"]
    assert passrate["columns"] == ["backend", "huggingface", "timm_models", "torchbench"]
    assert [row[0] for row in passrate["rows"]] == ["aot_eager", "inductor"]
    assert passrate["rows"][1][1] == "100%, 8/8 → 100%, 8/8"
    speedup = tables["geomean speedup"]["rows"][1][1]
    base, new = (float(text.rstrip("x")) for text in speedup.split(" → "))
    assert 1.0 < base < 3.0 and abs(new / base - 1) < 0.1
    assert tables["mean compile time"]["rows"][0][1].endswith("s")
    values = tables["values"]["rows"]
    assert len(values) == 4 * 2 * 3  # metrics x backends x suites


def test_cells_link_to_the_models_of_a_backend_and_suite(client, demo):
    html = client.get("/compilers/?mode=training").content.decode()
    assert "/compilers/models/?" in html and "backend=inductor" in html
    page = get_json(client, "/compilers/models/?mode=training&backend=inductor&suite=timm_models")
    [table] = page["tables"]
    assert table["columns"] == ["model", "speedup", "accuracy", "compile time",
                                "compression ratio"]
    assert len(table["rows"]) == 8 and table["rows"][0][2] == "pass → pass"
    assert page["filters"]["backend"] == "inductor"
    assert client.get("/compilers/models/?backend=tvm&format=json").json()["error"] == (
        "backend: 'tvm' is not one of 'aot_eager', 'inductor'")
    html = client.get("/compilers/models/?backend=tvm").content.decode()
    assert "Backend reset to aot_eager: &#x27;tvm&#x27; has no results for" in html


def _store(sha_value, speedup_of, accuracy_of):
    """The experiment runner's records of two backends, as `python -m runner compilers`
    writes them, uploaded for one commit."""
    found = []
    for name in ("mlp", "lstm"):
        for backend in ("eager", "aot_eager"):
            config = Config(models.builtin(name), backend, "eval", "float32", "cpu", None, 2, 1,
                            True, False, 60.0, "out")
            eager_time = 0.01
            time = eager_time / (speedup_of(name) if backend != "eager" else 1.0)
            line = {"repeat": 2, "iterations_per_run": 1,
                    "verification_code": accuracy_of(name) if backend != "eager" else "PASS",
                    "metrics": {"per_iter_time": [time, time], "compile_time": 2.0,
                                "peak_memory_mb": 10.0}}
            if backend == "eager":
                del line["metrics"]["compile_time"]
            else:  # the speedup, timed paired with eager in the backend's process
                line["metrics"]["paired"] = PairedTiming(
                    (1e3 * eager_time,) * 32, (1e3 * time,) * 32,
                    (speedup_of(name),) * 8).to_dict()
            baseline = {"metrics": {"per_iter_time": [eager_time] * 2, "peak_memory_mb": 12.0}}
            found += records.build(config, line, baseline, CONTEXT)
    store_upload(orjson.dumps(found), metadata={
        "repo": "example/models", "head_branch": "main", "head_sha": sha_value,
        "workflow_id": 1, "run_attempt": 1, "job_id": 1, "name": "experiments"})


def test_runner_output_shows_with_hud_colours(client, db):
    _store("b" * 40, lambda name: 2.0, lambda name: "PASS")
    _store("c" * 40, lambda name: 2.0 if name == "mlp" else 1.0,
           lambda name: "FAIL" if name == "lstm" else "PASS")
    url = f"/compilers/?repo=example/models&base={'b' * 40}&new={'c' * 40}"
    page = get_json(client, url)
    assert (page["filters"]["arch"], page["filters"]["dtype"]) == (CPU, "float32")
    tables = {table["name"]: table for table in page["tables"]}
    rows = {row[0]: row for row in tables["passrate"]["rows"]}
    assert rows["aot_eager"][1] == "100%, 2/2 → 50%, 1/2"
    assert rows["eager"][1] == "100%, 2/2 → 100%, 2/2"
    speedups = {row[0]: row for row in tables["geomean speedup"]["rows"]}
    assert speedups["aot_eager"][1] == "2.00x → 2.00x"  # over the models that pass (mlp)
    assert tables["memory compression ratio"]["rows"][0][1] == "1.20x → 1.20x"
    html = client.get(url).content.decode()
    assert 'class="worse"' in html  # the passrate drop
    models_page = get_json(client, url.replace("/compilers/", "/compilers/models/")
                           + "&backend=aot_eager&suite=builtin")
    rows = {row[0]: row for row in models_page["tables"][0]["rows"]}
    assert rows["lstm"][1:3] == ["2.00x → 1.00x", "pass → fail_accuracy"]
    assert rows["mlp"][1:3] == ["2.00x → 2.00x", "pass → pass"]


def test_empty_database_and_bad_parameters(client, db):
    page = get_json(client, "/compilers/")
    assert all(not table["rows"] for table in page["tables"])
    assert b'class="empty">No compiler results for these commits' in (
        client.get("/compilers/").content)
    assert client.get("/compilers/?threshold=-1&format=json").json()["error"] == (
        "threshold: Ensure this value is greater than or equal to 0.")
    assert "Threshold % reset to 5: &#x27;-1&#x27; refused: ensure this value is greater" in (
        client.get("/compilers/?threshold=-1").content.decode())


def test_a_speedup_of_zero_fails_a_model_and_leaves_the_geomean():
    from dashboards.pages.compilers import _aggregate

    summary = _aggregate([
        {"accuracy": "pass", "speedup": 2.0, "compilation_latency": 10.0},
        {"accuracy": "pass", "speedup": 0.0, "compilation_latency": 30.0},
        {"accuracy": "fail_accuracy", "speedup": 8.0},
        {"accuracy": "eager_variation", "speedup": 0.5},
    ])
    assert summary["accuracy"] == (2, 4)
    assert summary["speedup"] == pytest.approx(1.0)  # geomean of 2.0 and 0.5
    assert summary["compilation_latency"] == pytest.approx(20.0)
    assert "compression_ratio" not in summary
    # Nothing verified: every positive speedup counts, and there is no passrate.
    assert _aggregate([{"speedup": 4.0}, {"speedup": 1.0}]) == {"speedup": pytest.approx(2.0)}
