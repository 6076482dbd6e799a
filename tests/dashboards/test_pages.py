"""Dashboard pages on demo data: each page, its filters, JSON and CSV, honest numbers."""

import csv
import io
import json
import re

import pytest
from django.core.management import call_command

from benchsite.results.demo import sha
from benchsite.results.ingest import store_upload
from benchsite.results.models import Run
from tests.results.samples import TORCHAO, record

H100 = "NVIDIA H100 80GB HBM3"
XSS = "<img src=x onerror=alert(1)>"
NOW = {"repo": "pytorch/ao", "head_branch": "main", "head_sha": "a" * 40}  # timestamp: now


@pytest.fixture
def demo(db):
    call_command("load_demo", "--nights", "8")


def get_json(client, url):
    response = client.get(url + ("&" if "?" in url else "?") + "format=json")
    assert response.status_code == 200, response.content[:500]
    return response.json()


def csv_rows(client, url):
    response = client.get(url + ("&" if "?" in url else "?") + "format=csv")
    assert response.status_code == 200 and response["Content-Type"] == "text/csv"
    assert "attachment" in response["Content-Disposition"]
    return list(csv.reader(io.StringIO(response.content.decode())))


def test_home_lists_the_latest_runs(client, demo):
    response = client.get("/")
    assert response.status_code == 200
    latest = Run.objects.latest("timestamp")
    assert f'href="/runs/{latest.pk}/"'.encode() in response.content
    assert b"/quantization/?repo=pytorch%2Fao" in response.content


def test_quantization_defaults_to_the_latest_commit(client, demo):
    page = get_json(client, f"/quantization/?arch={H100}")
    assert page["filters"]["sha"] == sha(7) and page["filters"]["compile_mode"] == "max-autotune"
    heatmap = page["figures"][0]["data"][0]
    assert heatmap["type"] == "heatmap"
    assert len(heatmap["y"]) == 7 and len(heatmap["x"]) == 20  # recipes (and baseline) x shapes
    assert all(isinstance(v, float) for row in heatmap["z"] for v in row)
    geomeans = {row[0]: row for row in page["tables"][0]["rows"]}
    assert geomeans["int8dq"][2] == "20/20" and 1.0 < geomeans["int8dq"][1] < 2.0


def test_quantization_base_vs_new(client, demo):
    page = get_json(client, f"/quantization/?arch={H100}&base={sha(0)}&threshold=3")
    assert len(page["figures"]) == 2 and page["figures"][1]["data"][0]["zmid"] == 0.0
    cells = page["tables"][1]
    assert cells["columns"][-2:] == ["base speedup", "speedup change %"]
    html = client.get(f"/quantization/?arch={H100}&base={sha(0)}&threshold=0").content
    assert b'class="better"' in html and b'class="worse"' in html


def test_quantization_csv_and_a_device_without_float8(client, demo):
    rows = csv_rows(client, "/quantization/?arch=NVIDIA A100-SXM4-80GB&table=cells")
    assert rows[0][:3] == ["recipe", "shape (M-K-N)", "bf16 ms"]
    assert {row[0] for row in rows[1:]} == {"baseline", "int8wo", "int8dq", "int4wo-128"}


def test_bad_parameters_are_reset_with_a_note_and_refused_by_name_in_json(client, demo):
    response = client.get("/quantization/?arch=TPUv9&threshold=500")
    assert response.status_code == 200
    html = response.content.decode()
    assert (f"Device reset to {H100}: &#x27;TPUv9&#x27; has no results for Repo pytorch/ao, "
            "Branch main.") in html
    assert "Threshold % reset to 5: &#x27;500&#x27; refused: ensure this value" in html
    assert client.get("/quantization/?arch=TPUv9&format=json").json()["error"].startswith(
        "arch: 'TPUv9' is not one of")
    refused = client.get("/trends/?granularity=fortnight&format=json").json()
    assert refused["error"] == (
        "granularity: 'fortnight' is not one of 'hour', 'day', 'week', 'month'")
    assert refused["parameter"] == "granularity" and refused["status"] == 400
    assert client.get("/trends/?start=yesterday&format=json").status_code == 400
    assert client.get("/quantization/?threshold=500&format=csv").status_code == 400
    trends = client.get("/trends/?start=yesterday&granularity=fortnight")
    assert trends.status_code == 200 and trends.content.decode().count('class="note"') == 2


def test_trends_geomean_per_recipe_and_per_backend_with_passrate(client, demo):
    ao = get_json(client, "/trends/?repo=pytorch/ao&arch=" + H100)
    assert ao["filters"]["metric"] == "Fwd Speedup (x)" and ao["filters"]["group"] == "dtype"
    names = {trace["name"] for trace in ao["figures"][0]["data"]}
    assert names == {"baseline", "int8wo", "int8dq", "float8dq-tensor", "float8dq-row",
                     "float8wo", "int4wo-128"}
    assert all(len(trace["y"]) == 8 for trace in ao["figures"][0]["data"])
    inductor = get_json(client, "/trends/?repo=pytorch/pytorch&granularity=week")
    assert inductor["filters"]["group"] == "backend"
    assert [f["layout"]["title"]["text"] for f in inductor["figures"]] == [
        f"Geomean speedup by backend on {H100}", f"Passrate by backend on {H100}"]
    points = inductor["tables"][1]
    assert points["columns"][-2:] == ["passrate %", "pass / total"]
    # each run: 3 suites x 8 models x 2 modes accuracy results per backend
    assert all(int(row[6].split("/")[1]) % 48 == 0 for row in points["rows"])


def test_trends_chart_points_agree_with_the_points_table(client, demo):
    """The chart sends a point's time short, its geomean rounded and its counts as numbers
    for the hover: each still says what its row of the points table says."""
    for granularity, width in (("day", 10), ("hour", 16)):
        page = get_json(client, f"/trends/?repo=pytorch/ao&arch={H100}&range=90d"
                                f"&granularity={granularity}&page=all")
        rows = {(row[0], row[1]): row for row in page["tables"][1]["rows"]}
        charted = 0
        for trace in page["figures"][0]["data"]:
            assert "%{customdata[0]} points, %{customdata[1]} runs" in trace["hovertemplate"]
            for x, y, counts in zip(trace["x"], trace["y"], trace["customdata"], strict=True):
                assert len(x) == width
                row = next((row for (time, line), row in rows.items()
                            if line == trace["name"]
                            and time[:width].replace("T", " ") == x), None)
                if row is None:
                    assert y is None and counts is None
                    continue
                charted += 1
                assert y == pytest.approx(row[2], rel=1e-5) and counts == [row[3], row[4]]
        assert charted == len(rows) > 0


def test_trends_filters_change_the_data(client, demo):
    both = get_json(client, "/trends/?repo=pytorch/pytorch")
    training = get_json(client, "/trends/?repo=pytorch/pytorch&mode=training")
    assert training["filters"]["mode"] == "training"
    assert training["tables"][0]["rows"] != both["tables"][0]["rows"]
    assert get_json(client, "/trends/?repo=pytorch/pytorch&start=2001-01-01&end=2001-02-01"
                    )["tables"][1]["rows"] == []


def test_explorer_series_with_target(client, demo):
    page = get_json(client, "/explorer/?repo=vllm-project/vllm&metric=median_itl_ms")
    table = page["tables"][0]
    assert table["columns"][5:7] == ["target", "% of target"]
    assert all(row[6] is not None for row in table["rows"])
    assert page["figures"][0]["layout"]["title"]["text"] == "median_itl_ms"


def test_explorer_labels_string_results_with_their_commit_and_value(client, demo):
    page = get_json(client, "/explorer/?repo=pytorch/pytorch&benchmark=TorchInductor"
                            "&metric=accuracy&range=90d")
    [figure] = page["figures"]
    labels = [text for trace in figure["data"] for text in trace["text"]]
    assert labels and all(re.fullmatch(r"[0-9a-f]{10} (pass|fail_accuracy)", text)
                          for text in labels)
    assert {row[2] for row in page["tables"][0]["rows"]} <= {"pass", "fail_accuracy"}


def test_explorer_drill_down_to_one_model(client, demo):
    model = "int8dq-4096-4096-8192"
    page = get_json(client, f"/explorer/?repo=pytorch/ao&model={model}&arch={H100}")
    assert {row[1] for row in page["tables"][0]["rows"]} == {
        "Fwd Speedup (x)", "Bfloat16 Fwd Time (ms)", "Quantized Fwd Time (ms)",
        "Allocated Memory (MB)"}
    assert len(page["figures"]) == 4 and len(page["figures"][0]["data"][0]["x"]) == 8


def test_run_page_links_and_csv(client, demo):
    run = Run.objects.filter(repo="pytorch/ao").latest("timestamp")
    response = client.get(f"/runs/{run.pk}/")
    assert response.status_code == 200
    assert f"https://github.com/pytorch/ao/commit/{run.head_sha}".encode() in response.content
    assert (f"https://github.com/pytorch/ao/actions/runs/{run.workflow_id}/job/{run.job_id}"
            .encode() in response.content)
    rows = csv_rows(client, f"/runs/{run.pk}/")
    assert len(rows) == 1 + run.result_count
    assert client.get("/runs/999999/").status_code == 404


def test_missing_values_are_shown_as_missing_never_zero(client, db):
    failed = record(TORCHAO, **NOW, metric={"name": "status", "extra_info": {
        "benchmark_values": ["failed"], "error": "RuntimeError: boom"}})
    failed["model"]["name"] = "int8wo-2048-2048-2048"
    store_upload(json.dumps([record(TORCHAO, **NOW), failed]).encode())
    page = get_json(client, "/quantization/")
    cells = {row[1]: row for row in page["tables"][1]["rows"]}
    assert cells["2048-2048-2048"][4] is None and cells["2048-2048-2048"][-1] == "failed"
    assert page["figures"][0]["data"][0]["text"][0] == ["1.25x", "failed"]
    html = client.get("/quantization/").content.decode()
    assert "<td class=\"missing \">—</td>" in html


def test_untrusted_names_are_text_everywhere(client, db):
    evil = record(TORCHAO, **NOW, model={"name": XSS, "origins": [XSS]},
                  benchmark={**TORCHAO["benchmark"], "dtype": XSS})
    store_upload(json.dumps([evil]).encode())
    run = Run.objects.get()
    for url in ["/", f"/runs/{run.pk}/", "/explorer/?repo=pytorch/ao",
                "/trends/?repo=pytorch/ao",
                "/quantization/?repo=pytorch/ao"]:
        html = client.get(url).content.decode()
        assert XSS not in html, url
    explorer = get_json(client, "/explorer/?repo=pytorch/ao")
    assert explorer["tables"][0]["rows"][0][0] == XSS  # the data is kept as it was sent
    assert explorer["figures"][0]["data"][0]["name"] == "&lt;img src=x onerror=alert(1)&gt;"
    quantization = get_json(client, "/quantization/")
    assert quantization["figures"][0]["data"][0]["y"] == ["&lt;img src=x onerror=alert(1)&gt;"]


def test_compare_page_counts_changes_and_drills_down(client, demo):
    base, head = sha(0), sha(7)
    page = get_json(client, f"/compare/{base}...{head}?repo=pytorch/ao")
    assert page["filters"]["verdict"] in ("regression", "improvement", "unchanged")
    summary, series = page["tables"]
    assert summary["columns"][:5] == ["benchmark", "metric", "device", "geomean head/base",
                                      "common"]
    speed = [row for row in summary["rows"] if row[1] == "Fwd Speedup (x)"]
    assert {row[2] for row in speed} == {H100, "NVIDIA A100-SXM4-80GB"}
    assert all(row[4] > 0 for row in speed)
    assert series["paging"]["rows"] == sum(page["filters"]["counts"].values())
    only = get_json(client, f"/compare/{base}...{head}?repo=pytorch/ao&metric=Fwd Speedup (x)"
                            f"&arch={H100}&status=unchanged")
    shown = only["tables"][1]
    state = shown["columns"].index("state")
    assert shown["rows"] and {row[state] for row in shown["rows"]} == {"unchanged"}
    # Each state beside what it was judged by: the head against the level, not the base.
    at = {name: series["columns"].index(name)
          for name in ("change %", "vs level %", "state", "base", "head", "level")}
    for row in series["rows"]:
        if row[at["level"]] and row[at["head"]] is not None:
            vs_level = 100 * (row[at["head"]] / row[at["level"]] - 1)
            assert row[at["vs level %"]] == pytest.approx(vs_level, abs=0.01), row
        if row[at["state"]] in ("regression", "improvement") and row[at["level"]]:
            assert row[at["vs level %"]] is not None, row
    html = client.get(f"/compare/{base}...{head}?repo=pytorch/ao").content.decode()
    assert f"https://github.com/pytorch/ao/commit/{head}" in html
    assert client.get(f"/compare/{'0' * 40}...{'1' * 40}?repo=pytorch/ao").status_code == 404


FORMULA = '=HYPERLINK("https://evil.example","click")'


def test_csv_downloads_quote_names_a_spreadsheet_would_run(client, db):
    store_upload(json.dumps([record(TORCHAO, **NOW, model={"name": FORMULA})]).encode())
    run = Run.objects.get()
    for url in [f"/runs/{run.pk}/", "/explorer/?repo=pytorch/ao&table=series"]:
        rows = csv_rows(client, url)
        assert "'" + FORMULA in rows[1][0:2], url
        assert FORMULA not in [cell for row in rows for cell in row], url
    assert get_json(client, f"/runs/{run.pk}/")["tables"][0]["rows"][0][1] == FORMULA


def test_a_run_links_to_the_benchsite_job_whose_cell_uploaded_it(client, db):
    from benchsite.jobs.models import Job, JobCell

    stored = store_upload(json.dumps([record(TORCHAO, **NOW, name="anything")]).encode())
    run = Run.objects.get()
    job = Job.objects.create(name="cpu_small.yml", spec_yaml="", queue="cpu",
                             submitted_via="api", repo=run.repo, head_branch=run.head_branch,
                             head_sha=run.head_sha)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert f'href="/jobs/{job.pk}/"' not in html  # no cell of the job uploaded it yet
    JobCell.objects.create(job=job, index=0, key="int8wo", cell={}, upload=stored.upload)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert f'<a href="/jobs/{job.pk}/">job {job.pk}</a>' in html


def test_jobs_and_regressions_pages_are_json_and_csv_too(client, db):
    from benchsite.jobs.models import Job

    job = Job.objects.create(name="cpu_small.yml", spec_yaml="", queue="cpu",
                             submitted_via="api", repo="pytorch/ao", head_branch="main",
                             head_sha="a" * 40)
    jobs = get_json(client, "/jobs/")
    assert jobs["tables"][0]["rows"][0][:4] == [job.pk, "cpu_small.yml", "cpu", "pending"]
    assert csv_rows(client, "/jobs/?status=pending")[1][0] == str(job.pk)
    assert get_json(client, "/jobs/?status=failed")["tables"][0]["rows"] == []
    assert get_json(client, f"/jobs/{job.pk}/")["filters"] == {"job": job.pk}
    assert get_json(client, "/regressions/")["tables"][0]["rows"] == []
    assert client.get("/jobs/999999/").status_code == 404
