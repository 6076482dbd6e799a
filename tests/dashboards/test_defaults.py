"""Defaults that answer the usual question, on the short demo with a newer CPU smoke job:
the newest nightly on the repo's default branch, on the device with the most series; never
a line averaged over devices; the benchmark's headline metric over 90 days; an explorer
that opens on a readable selection."""

import json
import re
from datetime import UTC, datetime, timedelta
from html import unescape

import orjson
import pytest

from benchsite.regressions.models import DetectionSettings
from benchsite.results.demo import A100, H100, sha
from benchsite.results.ingest import store_upload
from benchsite.results.models import Result
from tests.dashboards.conftest import SMOKE_ARCH
from tests.results.samples import TORCHAO, record

pytestmark = pytest.mark.django_db
RECIPES = {"baseline", "int8wo", "int8dq", "float8dq-tensor", "float8dq-row", "float8wo",
           "int4wo-128"}


def get_json(client, url):
    response = client.get(url + ("&" if "?" in url else "?") + "format=json")
    assert response.status_code == 200, response.content[:500]
    return response.json()


def test_quantization_opens_on_the_newest_nightly_of_the_busiest_device(client, short_demo):
    filters = get_json(client, "/quantization/")["filters"]
    # the smoke job is newer, on a device with 2 series where the H100 has 140
    assert (filters["branch"], filters["arch"], filters["sha"]) == ("main", H100.arch, sha(7))
    html = client.get("/quantization/").content.decode()
    assert f'<option value="{SMOKE_ARCH}">{SMOKE_ARCH}</option>' in html
    assert get_json(client, f"/quantization/?arch={SMOKE_ARCH}")["filters"]["sha"] == "job-1"


def test_a_device_alone_opens_on_its_newest_commit_and_keeps_a_commit_it_has(client,
                                                                             short_demo):
    assert get_json(client, f"/quantization/?arch={A100.arch}")["filters"]["sha"] == sha(7)
    kept = get_json(client, f"/quantization/?arch={A100.arch}&sha={sha(3)}")["filters"]
    assert kept["sha"] == sha(3)
    response = client.get(f"/quantization/?arch={A100.arch}&sha=job-1")
    assert response.status_code == 200
    assert (f"Commit reset to {sha(7)[:10]} · " in response.content.decode()
            and f"&#x27;job-1&#x27; has no results for Repo pytorch/ao, Branch main, Device "
                f"{A100.arch}." in response.content.decode())


def test_the_default_branch_is_the_repos_in_the_detection_settings(client, short_demo):
    DetectionSettings.load().repo_branches.create(repo="pytorch/*", branches="release, main")
    cell = record(TORCHAO)
    store_upload(orjson.dumps([cell]), metadata={
        "repo": "pytorch/ao", "head_branch": "release", "head_sha": "r" * 40,
        "workflow_id": 9, "run_attempt": 1, "job_id": 9, "name": "release nightly"},
        announce=False)
    filters = get_json(client, "/quantization/")["filters"]
    assert (filters["branch"], filters["sha"]) == ("release", "r" * 40)
    assert get_json(client, "/quantization/?branch=main")["filters"]["sha"] == sha(7)


def test_trends_default_to_the_headline_metric_over_90_days_on_the_busiest_device(
        client, short_demo):
    page = get_json(client, "/trends/")
    filters = page["filters"]
    assert (filters["metric"], filters["arch"], filters["range"]) == (
        "Fwd Speedup (x)", H100.arch, "90d")
    start = datetime.fromisoformat(filters["start"])
    assert abs(start - (datetime.now(UTC) - timedelta(days=90))) < timedelta(minutes=5)
    traces = page["figures"][0]["data"]
    assert {trace["name"] for trace in traces} == RECIPES
    assert all(sum(y is not None for y in trace["y"]) == 8 for trace in traces)
    assert page["figures"][0]["layout"]["title"]["text"] == (
        f"Geomean Fwd Speedup (x) by recipe on {H100.arch}")


def test_trends_of_all_devices_draw_a_line_per_device_never_an_average(client, short_demo):
    every = get_json(client, "/trends/?arch=all")["figures"][0]["data"]
    names = {trace["name"] for trace in every}
    assert names == ({f"{recipe} · {H100.arch}" for recipe in RECIPES}
                     | {f"{recipe} · {A100.arch}" for recipe in RECIPES - {
                         "float8dq-tensor", "float8dq-row", "float8wo"}}
                     | {f"{recipe} · {SMOKE_ARCH}" for recipe in ("baseline", "int8wo")})
    one = {trace["name"]: trace["y"] for trace in get_json(
        client, f"/trends/?arch={A100.arch}")["figures"][0]["data"]}
    line = next(trace for trace in every if trace["name"] == f"int8dq · {A100.arch}")
    assert [y for y in line["y"] if y is not None] == [y for y in one["int8dq"] if y]
    by_device = get_json(client, "/trends/?arch=all&group=arch")["figures"][0]["data"]
    assert {trace["name"] for trace in by_device} == {H100.arch, A100.arch, SMOKE_ARCH}


def test_lines_per_names_the_column_for_what_it_holds(client, short_demo):
    quant = client.get("/trends/").content.decode()
    assert '<option value="dtype" selected>recipe</option>' in quant
    inductor = client.get("/trends/?repo=pytorch/pytorch&benchmark=TorchInductor")
    assert '<option value="dtype">dtype</option>' in inductor.content.decode()


def test_explorer_opens_on_the_series_that_changed_most(client, short_demo):
    page = get_json(client, "/explorer/")
    filters = page["filters"]
    assert (filters["metric"], filters["arch"]) == ("Fwd Speedup (x)", H100.arch)
    assert (filters["series"], filters["shown"]) == (140, 12)  # 7 recipes x 20 shapes
    [figure] = page["figures"]
    assert len(figure["data"]) == 12 and figure["layout"]["legend"]["orientation"] == "h"
    values: dict[str, list[float]] = {}
    for model, value in (Result.objects.filter(
            series__repo="pytorch/ao", series__metric="Fwd Speedup (x)",
            series__arch=H100.arch, run__head_branch="main")
            .order_by("timestamp").values_list("series__model", "value")):
        values.setdefault(model, []).append(value)
    changes = sorted((abs(v[-1] / v[0] - 1) for v in values.values()), reverse=True)
    shown = [abs(trace["y"][-1] / trace["y"][0] - 1) for trace in figure["data"]]
    assert sorted(shown, reverse=True) == pytest.approx(changes[:12])
    html = client.get("/explorer/").content.decode()
    assert "Showing the 12 of 140 series that changed most over the range" in html
    model = get_json(client, "/explorer/?model=int8dq-4096-4096-8192")  # every metric of it
    assert model["filters"]["metric"] == "all" and len(model["figures"]) == 4


def test_explorer_ranks_series_by_their_change_and_a_lone_point_last(client):
    # 13 series (one more than a chart shows): 12 measured on two nights, changed by 0..10 %
    # and to an infinite value, and one measured once, which has no change (not a change of
    # 0: it would then stay before the unchanged int8wo-1, by name).
    now = int(datetime.now(UTC).timestamp())
    latest = {f"int8wo-{n}": 1 + (n - 1) / 100 for n in range(1, 12)} | {"int8wo-inf": "inf"}
    for night, moved in ((2, False), (1, True)):
        records = [record(TORCHAO, model={"name": name, "type": "layer"},
                          metric={**TORCHAO["metric"],
                                  "benchmark_values": [value if moved else 1.0]})
                   for name, value in latest.items()]
        if moved:
            records.append(record(TORCHAO, model={"name": "int8wo-0once", "type": "layer"},
                                  metric={**TORCHAO["metric"], "benchmark_values": [9.0]}))
        store_upload(orjson.dumps(records), metadata={
            "repo": "acme/lab", "head_branch": "main", "head_sha": sha(night),
            "timestamp": now - night * 86400})
    page = get_json(client, "/explorer/?repo=acme/lab&range=7d")
    assert (page["filters"]["series"], page["filters"]["shown"]) == (13, 12)
    [figure] = page["figures"]
    lines = {trace["name"]: trace["y"] for trace in figure["data"]}
    assert set(lines) == set(latest)
    assert lines["int8wo-11"] == [1.0, 1.1]  # in order of time
    # The JSON is JSON: the infinite latest value is null there, not a bare Infinity token
    # (which JSON lacks: JSON.parse and jq refuse it); the HTML shows it as inf.
    body = client.get("/explorer/?repo=acme/lab&range=7d&format=json").content
    strict = json.loads(body, parse_constant=lambda token: pytest.fail(f"{token} in JSON"))
    [table] = [table for table in strict["tables"] if table["name"] == "series"]
    latest_of = {row[0]: row[table["columns"].index("latest")] for row in table["rows"]}
    assert latest_of["int8wo-inf"] is None and latest_of["int8wo-11"] == 1.1
    html = client.get("/explorer/?repo=acme/lab&range=7d").content.decode()
    assert '<td class="">inf</td>' in html


def test_compilers_offer_only_benchmarks_they_can_show(client, short_demo):
    html = client.get("/compilers/").content.decode()
    assert '<option value="TorchInductor" selected>' in html and "fused kernels" not in html
    reset = client.get("/compilers/?benchmark=fused kernels").content.decode()
    assert "Benchmark reset to TorchInductor: &#x27;fused kernels&#x27;" in reset
    assert client.get("/compilers/?benchmark=fused kernels&format=json").status_code == 400


def test_home_links_open_each_run_on_its_own_branch_and_device(client, short_demo):
    cell = record(TORCHAO)
    cell["benchmark"]["extra_info"]["arch"] = SMOKE_ARCH
    store_upload(orjson.dumps([cell]), metadata={
        "repo": "pytorch/ao", "head_branch": "adhoc", "head_sha": "adhoc-job-2",
        "workflow_id": 0, "run_attempt": 1, "job_id": 2, "name": "cpu_small"}, announce=False)
    html = client.get("/").content.decode()
    links = set(re.findall(r'href="(/(?:quantization|trends)/\?[^"]+)"', html))
    adhoc = next(link for link in links if "adhoc-job-2" in link)
    assert "branch=adhoc" in adhoc
    for link in links:
        page = client.get(unescape(link))
        assert page.status_code == 200 and b'class="note"' not in page.content, link
    opened = get_json(client, unescape(adhoc))["filters"]
    assert (opened["branch"], opened["sha"], opened["arch"]) == (
        "adhoc", "adhoc-job-2", SMOKE_ARCH)
