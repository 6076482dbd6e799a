"""The fused kernels page on demo data: bandwidth charts, geomeans with their points, the
cells table and CSV, failed cells, and parameters."""

import csv
import io
import json

import pytest
from django.core.management import call_command

from benchsite.results.demo import sha
from benchsite.results.ingest import store_upload

H100 = "NVIDIA H100 80GB HBM3"
SHAPES = ["32768x1024", "32768x4096", "32768x16384"]
COMPILED = "compiled:max-autotune-no-cudagraphs"


@pytest.fixture
def demo(db):
    call_command("load_demo", "--nights", "2")


def get_json(client, url):
    response = client.get(url + ("&" if "?" in url else "?") + "format=json")
    assert response.status_code == 200, response.content[:500]
    return response.json()


def test_bandwidth_per_backend_for_each_kernel_and_direction(client, demo):
    page = get_json(client, "/kernels/")
    assert page["filters"] == {"repo": "pytorch/pytorch", "branch": "main", "sha": sha(1),
                               "arch": H100, "dtype": "bfloat16"}
    titles = [figure["layout"]["title"]["text"] for figure in page["figures"]]
    assert titles == [f"{kernel} {direction} ({H100})"
                      for kernel in ("cross_entropy", "layer_norm", "rms_norm", "softmax")
                      for direction in ("forward", "backward")]
    for figure in page["figures"]:
        assert [trace["name"] for trace in figure["data"]] == ["eager", COMPILED, "liger"]
        assert figure["layout"]["xaxis"]["categoryarray"] == SHAPES
        assert figure["layout"]["yaxis"]["title"]["text"] == "memory bandwidth (GB/s)"
        for trace in figure["data"]:
            assert trace["x"] == SHAPES
            assert all(300 < value < 3000 for value in trace["y"])  # GB/s on an H100


def test_geomean_speedup_per_backend_with_its_points(client, demo):
    geomean, cells = get_json(client, "/kernels/")["tables"]
    assert geomean["columns"] == ["backend", "direction", "geomean speedup over eager",
                                  "points"]
    rows = {(row[0], row[1]): row for row in geomean["rows"]}
    assert list(rows) == [(backend, direction) for backend in (COMPILED, "liger")
                          for direction in ("forward", "backward", "all")]
    assert rows[COMPILED, "all"][3] == "24/24" and rows["liger", "forward"][3] == "12/12"
    assert all(1.0 < row[2] < 2.5 for row in geomean["rows"])
    assert len(cells["rows"]) == 4 * 2 * 3 * 3  # kernels x directions x shapes x backends
    first = cells["rows"][0]
    assert first[:4] == ["cross_entropy", "forward", "32768x1024", "eager"]
    assert first[6:] == [None, None, "ok"]  # eager: no speedup or accuracy of its own


def test_cells_csv_and_other_commits(client, demo):
    response = client.get("/kernels/?format=csv&table=cells")
    assert response.status_code == 200 and response["Content-Type"] == "text/csv"
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == ["kernel", "direction", "shape (M x N)", "backend", "latency ms",
                       "GB/s", "speedup", "accuracy", "status"]
    assert len(rows) == 1 + 72
    older = get_json(client, f"/kernels/?sha={sha(0)}")
    assert older["filters"]["sha"] == sha(0) and len(older["figures"]) == 8


def test_failed_and_skipped_cells_say_so(client, db):
    def record(backend, metric, extra=None, values=None, mode="none"):
        return {"benchmark": {"name": "fused kernels", "mode": "backward", "dtype": "bfloat16",
                              "extra_info": {"device": "cuda", "arch": H100, "shape": [64, 128],
                                             "torch_compile_mode": mode}},
                "model": {"name": "softmax", "backend": backend},
                "metric": {"name": metric, "benchmark_values": values or [],
                           "extra_info": extra or {}}}

    failed = {"benchmark_values": ["failed"], "error": "differs from eager"}
    records = [record("eager", "memory_bandwidth", values=[900.0]),
               record("compiled", "accuracy", {"benchmark_values": ["fail_accuracy"]},
                      mode="default"),
               record("compiled", "status", failed, mode="default"),
               record("quack", "status", {"benchmark_values": ["skipped"], "reason": "no"})]
    store_upload(json.dumps(records).encode(), metadata={
        "repo": "pytorch/pytorch", "head_branch": "main", "head_sha": "f" * 40})
    page = get_json(client, "/kernels/")
    cells = {row[3]: row for row in page["tables"][1]["rows"]}
    assert cells["compiled:default"][4:] == [None, None, None, "fail_accuracy", "failed"]
    assert cells["quack"][-1] == "skipped" and cells["eager"][5] == 900.0
    [figure] = page["figures"]
    texts = {trace["name"]: trace["text"] for trace in figure["data"]}
    assert texts["compiled:default"] == ["failed, accuracy fail_accuracy"]
    assert page["tables"][0]["rows"][0][1:] == ["backward", None, "0/1"]


def test_no_results_and_bad_parameters(client, db):
    response = client.get("/kernels/")
    assert response.status_code == 200
    assert b"No fused kernel results for this commit and device." in response.content
    response = client.get("/kernels/?arch=nope&format=json")
    assert response.status_code == 400 and response.json()["error"].startswith("arch: 'nope'")
