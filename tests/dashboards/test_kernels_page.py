"""The fused kernels page on demo data: bandwidth charts with the device's peak, geomeans
with their points and 95% intervals, the cells table (a page at a time) and CSV, failed
cells, colours only outside the noise, and parameters."""

import csv
import io
import json
import re

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
                               "arch": H100, "dtype": "bfloat16", "peak_gbs": 3350,
                               "page": 1, "pages": 2, "rows": 72}
    titles = [figure["layout"]["title"]["text"] for figure in page["figures"]]
    assert titles == [f"{kernel} {direction}"
                      for kernel in ("cross_entropy", "layer_norm", "rms_norm", "softmax")
                      for direction in ("forward", "backward")]
    for figure in page["figures"]:
        *backends, peak = figure["data"]
        assert [trace["name"] for trace in backends] == ["eager", COMPILED, "liger"]
        assert peak["name"] == "peak 3,350 GB/s" and peak["y"] == [3350] * 3
        assert peak["line"]["dash"] == "dash"
        assert figure["layout"]["xaxis"]["categoryarray"] == SHAPES
        assert figure["layout"]["yaxis"]["title"]["text"] == "GB/s"
        assert figure["layout"]["height"] <= 340  # a grid of charts, not a stack
        for trace in backends:
            assert trace["x"] == SHAPES
            assert all(300 < value < 3000 for value in trace["y"])  # GB/s on an H100
            assert all("% of peak" in text for text in trace["text"])
        compiled = backends[1]["text"][0]
        assert "x (95% CI " in compiled and " pairs" in compiled and compiled.endswith(
            "eager, accuracy pass")


def test_geomean_speedup_per_backend_with_its_points(client, demo):
    geomean, cells = get_json(client, "/kernels/?page=all")["tables"]
    assert geomean["columns"] == ["backend", "direction", "geomean speedup over eager",
                                  "95% CI", "points"]
    rows = {(row[0], row[1]): row for row in geomean["rows"]}
    assert list(rows) == [(backend, direction) for backend in (COMPILED, "liger")
                          for direction in ("forward", "backward", "all")]
    assert rows[COMPILED, "all"][4] == "24/24" and rows["liger", "forward"][4] == "12/12"
    assert all(1.0 < row[2] < 2.5 for row in geomean["rows"])
    for row in geomean["rows"]:
        low, high = map(float, row[3].split("–"))
        assert low <= round(row[2], 3) <= high and low < high
    assert len(cells["rows"]) == 4 * 2 * 3 * 3  # kernels x directions x shapes x backends
    first, second = cells["rows"][:2]
    assert first[:4] == ["cross_entropy", "forward", "32768x1024", "eager"]
    assert first[7:] == [None, None, None, "ok"]  # eager: no speedup or accuracy of its own
    assert first[6] == round(100 * first[5] / 3350, 1)  # % of the H100's peak
    assert second[3] == COMPILED and second[8].endswith(" pairs")
    html = client.get("/kernels/").content.decode()
    assert html.count('<td class="better">') >= 6  # every geomean: clearly faster
    assert "H100 SXM5 80GB HBM3: 3,350 GB/s" in html


def test_cells_csv_and_other_commits(client, demo):
    response = client.get("/kernels/?format=csv&table=cells")
    assert response.status_code == 200 and response["Content-Type"] == "text/csv"
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == ["kernel", "direction", "shape (M x N)", "backend", "latency ms",
                       "GB/s", "% of peak", "speedup", "speedup 95% CI", "accuracy", "status"]
    assert len(rows) == 1 + 72  # every row, not a page
    first, second = get_json(client, "/kernels/")["tables"][1], get_json(
        client, "/kernels/?page=2")["tables"][1]
    assert len(first["rows"]) == 50 and len(second["rows"]) == 22
    assert first["paging"] == {"page": 1, "pages": 2, "rows": 72}
    assert [row[:4] for row in first["rows"] + second["rows"]] == [row[:4] for row in rows[1:]]
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
    assert cells["compiled:default"][4:] == [None, None, None, None, None, "fail_accuracy",
                                            "failed"]
    assert cells["quack"][-1] == "skipped" and cells["eager"][5] == 900.0
    assert cells["eager"][6] == round(100 * 900 / 3350, 1)
    [figure] = page["figures"]
    texts = {trace["name"]: trace["text"] for trace in figure["data"] if "text" in trace}
    assert texts["compiled:default"] == ["failed, accuracy fail_accuracy"]
    assert page["tables"][0]["rows"][0][1:] == ["backward", None, None, "0/1"]


def test_no_results_and_bad_parameters(client, db):
    response = client.get("/kernels/")
    assert response.status_code == 200
    assert b"No fused kernel results for this commit and device." in response.content
    response = client.get("/kernels/?arch=nope&format=json")
    assert response.status_code == 400 and response.json()["error"].startswith("arch: 'nope'")


def test_a_speedup_is_coloured_only_outside_its_noise(client, db):
    def speedup(backend, value, low, high, unstable=False):
        return {"benchmark": {"name": "fused kernels", "mode": "forward", "dtype": "bfloat16",
                              "extra_info": {"device": "cuda", "arch": "NVIDIA L4",
                                             "shape": [64, 128], "torch_compile_mode": "none"}},
                "model": {"name": "softmax", "backend": backend},
                "metric": {"name": "speedup", "benchmark_values": [value],
                           "extra_info": {"ci_low": low, "ci_high": high, "pairs": 12,
                                          "unstable": unstable}}}

    records = [speedup("faster", 1.30, 1.20, 1.40), speedup("noise", 1.05, 0.97, 1.12),
               speedup("slower", 0.80, 0.75, 0.85), speedup("unstable", 1.50, 1.10, 1.90, True)]
    store_upload(json.dumps(records).encode(), metadata={
        "repo": "pytorch/pytorch", "head_branch": "main", "head_sha": "f" * 40})
    page = get_json(client, "/kernels/")
    assert page["filters"]["arch"] == "NVIDIA L4" and page["filters"]["peak_gbs"] == 300
    cells = {row[3]: row for row in page["tables"][1]["rows"]}
    assert cells["noise"][7:9] == [1.05, "0.970–1.120, 12 pairs"]
    assert cells["unstable"][8] == "1.100–1.900, 12 pairs, unstable"
    html = client.get("/kernels/").content.decode()
    assert '<td class="better">1.3</td>' in html and '<td class="worse">0.8</td>' in html
    assert '<td class="">1.05</td>' in html  # inside its interval: not a change
    assert '<td class="noise">1.5</td>' in html


def test_peak_bandwidth_of_the_devices_records_name():
    from dashboards.peaks import peak_bandwidth

    assert peak_bandwidth("NVIDIA H100 80GB HBM3").gbs == 3350
    assert peak_bandwidth("NVIDIA H100 PCIe").gbs == 2000
    assert peak_bandwidth("NVIDIA A100-SXM4-80GB").gbs == 2039
    assert peak_bandwidth("NVIDIA A100-SXM4-40GB").gbs == 1555
    assert peak_bandwidth("NVIDIA A100 80GB PCIe").gbs == 1935
    assert peak_bandwidth("NVIDIA L4").gbs == 300
    assert peak_bandwidth("NVIDIA L40S").gbs == 864
    assert peak_bandwidth("AMD Instinct MI300X").gbs == 5300
    assert peak_bandwidth("AMD EPYC 7R13 48-Core Processor") is None


def test_a_device_without_a_known_peak_has_no_line_and_says_so(client, db):
    record = {"benchmark": {"name": "fused kernels", "mode": "forward", "dtype": "bfloat16",
                            "extra_info": {"device": "cuda", "arch": "Some Future GPU",
                                           "shape": [64, 128], "torch_compile_mode": "none"}},
              "model": {"name": "softmax", "backend": "eager"},
              "metric": {"name": "memory_bandwidth", "benchmark_values": [500.0]}}
    store_upload(json.dumps([record]).encode(), metadata={
        "repo": "pytorch/pytorch", "head_branch": "main", "head_sha": "f" * 40})
    page = get_json(client, "/kernels/")
    assert page["filters"]["peak_gbs"] is None
    assert [trace["name"] for trace in page["figures"][0]["data"]] == ["eager"]
    assert page["tables"][1]["rows"][0][6] is None
    assert b'No peak bandwidth is known for this device' in client.get("/kernels/").content


def kernel_record(arch, dtype, backend, bandwidth, benchmark="fused kernels"):
    return {"benchmark": {"name": benchmark, "mode": "forward", "dtype": dtype,
                          "extra_info": {"device": "cuda", "arch": arch, "shape": [64, 128],
                                         "torch_compile_mode": "none"}},
            "model": {"name": "softmax", "backend": backend},
            "metric": {"name": "memory_bandwidth", "benchmark_values": [bandwidth]}}


def options(html, name):
    """The values a filter's dropdown offers, and the selected one."""
    select = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', html, re.S).group(1)
    offered = re.findall(r'<option value="([^"]*)"', select)
    return offered, re.search(r'<option value="([^"]*)" selected>', select).group(1)


def test_the_form_offers_what_has_kernel_results_and_shows_only_its_cells(client, db):
    def upload(branch, commit, records):
        store_upload(json.dumps(records).encode(), metadata={
            "repo": "pytorch/pytorch", "head_branch": branch, "head_sha": commit * 40})

    upload("main", "a", [kernel_record(H100, "bfloat16", "eager", 900.0),
                         kernel_record(H100, "bfloat16", "liger", 1200.0),
                         kernel_record(H100, "float32", "eager", 800.0)])
    upload("main", "b", [kernel_record("NVIDIA L4", "float16", "eager", 250.0)])
    upload("release/2.8", "c", [kernel_record(H100, "bfloat16", "eager", 950.0)])
    upload("feature", "d", [kernel_record("NVIDIA A100-SXM4-80GB", "bfloat16", "eager",
                                          700.0, benchmark="other")])

    html = client.get("/kernels/").content.decode()
    assert options(html, "branch") == (["main", "release/2.8"], "main")
    # the busiest device and its newest commit, not the L4's newer one
    assert options(html, "arch") == ([H100, "NVIDIA L4"], H100)
    assert options(html, "sha") == (["a" * 40], "a" * 40)
    assert options(html, "dtype") == (["bfloat16", "float32"], "bfloat16")
    bf16 = get_json(client, "/kernels/")
    assert [row[3:6] for row in bf16["tables"][1]["rows"]] == [["eager", None, 900.0],
                                                                ["liger", None, 1200.0]]

    fp32 = get_json(client, "/kernels/?dtype=float32")
    assert fp32["filters"]["dtype"] == "float32"
    assert [row[3:6] for row in fp32["tables"][1]["rows"]] == [["eager", None, 800.0]]
    l4 = client.get("/kernels/?arch=NVIDIA L4").content.decode()
    assert options(l4, "sha") == (["b" * 40], "b" * 40)
    assert options(l4, "dtype") == (["float16"], "float16")  # no bfloat16 there
    cells = get_json(client, "/kernels/?arch=NVIDIA L4")["tables"][1]["rows"]
    assert [row[3:7] for row in cells] == [["eager", None, 250.0, round(100 * 250 / 300, 1)]]
    release = client.get("/kernels/?branch=release/2.8").content.decode()
    assert options(release, "arch") == ([H100], H100)
    assert options(release, "sha") == (["c" * 40], "c" * 40)

    response = client.get("/kernels/?dtype=float16").content.decode()
    assert ("Dtype reset to bfloat16: &#x27;float16&#x27; has no results for Commit "
            f"{'a' * 10} · ") in response
    assert client.get("/kernels/?dtype=float16&format=json").json()["error"].startswith(
        "dtype: 'float16'")
