"""A cell the runner marked suspect (its quantized model 1000x slower than bf16) keeps its number
but is shown as suspect, never coloured as a speedup: records written by the runner's own
record writer, stored through the upload path."""

import json

from benchsite.results.ingest import store_upload
from benchsite.results.models import Run
from dashboards.pages.common import Suspect, suspect_of
from runner.engine.paired import PairedTiming
from runner.engine.run_context import RunContext
from runner.quant.cells import QuantCell
from runner.quant.records import cell_records
from runner.quant.results import CellResult
from runner.quant.shapes import Shape

H100 = "NVIDIA H100 80GB HBM3"
NEW, BASE = "a" * 40, "b" * 40
CONTEXT = RunContext(cpu_info="Intel Xeon", cpu_count=16, mem_gb=128.0, avail_mem_gb=100.0,
                     gpu_info=H100, gpu_count=1, gpu_mem_gb=80.0, avail_gpu_mem_gb=79.0,
                     gpu_capability="9.0", torch_version="2.11.0", torch_sha=None,
                     cuda_version="12.8", torchao_version="0.18.0")
STEADY = (0.99, 1.0, 1.0, 1.01, 1.0, 1.0, 0.995, 1.005)
KERNELS = [{"name": "triton_poi_fused_dequant_0", "total_ms": 3540.2, "calls": 3},
           {"name": "ampere_bf16_gemm", "total_ms": 4.1, "calls": 3}]


def cell_result(recipe: str, speedup: float, suspect: str | None = None) -> CellResult:
    cell = QuantCell("nightly", recipe, None, Shape("custom", 8192, 8192, 8192), "linear",
                     "bfloat16", "cuda", "max-autotune", "out")
    ratios = tuple(r * speedup for r in STEADY)
    paired = PairedTiming((1.58,) * 32, (1.58 / speedup,) * 32, ratios)
    return CellResult(cell, "ok", eager=paired, compiled=paired, suspect=suspect,
                      top_kernels=KERNELS if suspect else [])


def upload(head_sha: str, *results: CellResult) -> None:
    records = [record for result in results for record in cell_records(result, CONTEXT)]
    store_upload(json.dumps(records).encode(), metadata={
        "repo": "pytorch/ao", "head_branch": "main", "head_sha": head_sha, "workflow_id": 1,
        "run_attempt": 1, "job_id": 1 if head_sha == NEW else 2, "name": "h100-nightly",
        "timestamp": 1_760_000_000 if head_sha == NEW else 1_759_000_000}, announce=False)


def page_json(client, url):
    response = client.get(url + "&format=json")
    assert response.status_code == 200, response.content[:500]
    return response.json()


WHY = "speedup 0.0013x: the quantized model 749x slower than bf16"


def test_a_suspect_cell_is_shown_as_suspect_and_never_coloured(client, db):
    upload(BASE, cell_result("int8wo", 1.2), cell_result("int8dq", 1.5))
    upload(NEW, cell_result("int8wo", 0.001335, suspect=WHY), cell_result("int8dq", 1.6))
    url = f"/quantization/?arch={H100}&compile_mode=max-autotune&sha={NEW}"
    page = page_json(client, url)

    heatmap = page["figures"][0]["data"][0]
    rows = dict(zip(heatmap["y"], zip(heatmap["z"], heatmap["text"], heatmap["customdata"],
                                      strict=True), strict=True))
    z, text, hover = rows["int8wo"]
    assert z == [1.0] and text == ["suspect 0.00134x"]  # the neutral colour, marked
    assert hover[0].endswith(f": suspect: {WHY}; top kernel triton_poi_fused_dequant_0 "
                             "(3540.200 ms)")
    assert rows["int8dq"][:2] == ([1.6], ["1.60x"])  # an ordinary speedup, coloured

    cells = page["tables"][1]
    status = {row[0]: row[-1] for row in cells["rows"]}
    assert status["int8wo"].startswith(f"suspect: {WHY}") and status["int8dq"] == "ok"
    speedups = {row[0]: row[cells["columns"].index("speedup")] for row in cells["rows"]}
    assert speedups["int8wo"] == 0.001335  # the number is kept
    geomeans = {row[0]: row[1:3] for row in page["tables"][0]["rows"]}
    assert geomeans["int8wo"] == [None, "0/1"]  # not averaged as a speedup

    html = client.get(url).content.decode()
    assert '<td class="suspect">suspect: speedup 0.0013x' in html
    assert '<td class="noise">0.001335</td>' in html

    change = page_json(client, f"{url}&base={BASE}")["figures"][1]["data"][0]
    changes = dict(zip(change["y"], zip(change["z"], change["text"], strict=True),
                       strict=True))
    assert changes["int8wo"] == ([0.0], ["≈-99.9%"])  # a change from it is not coloured


def test_the_run_page_marks_a_suspect_speedup(client, db):
    upload(NEW, cell_result("int8wo", 0.001335, suspect=WHY))
    html = client.get(f"/runs/{Run.objects.get().pk}/").content.decode()
    assert ('<td class="noise">0.001335</td><td class="spread suspect">95% CI 0.00–0.00, 8 pairs; '
            f"suspect: {WHY}; top kernel triton_poi_fused_dequant_0 (3540.200 ms)</td>") in html


def test_a_suspicion_is_read_only_from_text():
    assert suspect_of({"suspect": True}) is None and suspect_of(None) is None
    assert suspect_of({"suspect": "slow", "top_kernels": "x"}) == Suspect("slow")
    assert suspect_of({"suspect": "slow", "top_kernels": [{"name": "k", "total_ms": "1"}]}) == (
        Suspect("slow", "k"))


def test_a_gpu_speedup_says_how_it_was_timed():
    from dashboards.pages.common import interval_of

    info = {"ci_low": 1.2, "ci_high": 1.3, "pairs": 9, "unstable": False,
            "timing_method": "cuda_graph", "calls_per_block": [37, 12], "l2": "warm"}
    assert interval_of(info).describe() == "95% CI 1.20–1.30, 9 pairs, cuda_graph ×37/12, " \
        "L2 warm"
    rotated = {**info, "l2": "rotated"}  # over copies of each model (--rotate-weights)
    assert interval_of(rotated).describe().endswith("cuda_graph ×37/12, L2 rotated")
    batched = {**info, "timing_method": "batched", "calls_per_block": "<b>", "l2": "<i>"}
    assert interval_of(batched).describe() == "95% CI 1.20–1.30, 9 pairs, batched"
    # a CPU's blocks, an unknown method and older records say nothing more
    for method in ("cpu_blocks", "<script>", None):
        assert interval_of({**info, "timing_method": method}).describe() == (
            "95% CI 1.20–1.30, 9 pairs")
