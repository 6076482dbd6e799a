"""GET /api/v3/results, runs and uploads; the OpenAPI schema and docs."""

import csv
import io
import math

import pytest

from benchsite.results.ingest import store_upload
from tests.results.samples import INDUCTOR_ACCURACY, META, VLLM, record


def upload(records, **metadata):
    import json

    return store_upload(json.dumps(records).encode(), metadata=metadata).upload


@pytest.fixture
def history(db):
    """Two nightly runs of pytorch/ao on main, one PR run, and a vLLM run."""
    for day, sha in enumerate(["1" * 40, "2" * 40]):
        meta = {**META, "head_sha": sha, "workflow_id": day, "timestamp": 1_760_000_000 + day}
        upload([record(**meta), record(**meta, model={"name": "int8wo-2048-2048-2048"}),
                record(INDUCTOR_ACCURACY, **meta)])
    upload([record(**{**META, "head_branch": "pr-7", "head_sha": "3" * 40})])
    upload([record(VLLM, **{**META, "repo": "vllm-project/vllm"})])


def rows(api, query=""):
    response = api.get("/api/v3/results" + query)
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_results_newest_first_with_all_fields(api, history):
    found = rows(api)
    assert len(found) == 8
    assert [row["timestamp"] for row in found] == sorted(
        (row["timestamp"] for row in found), reverse=True)
    vllm = next(row for row in found if row["repo"] == "vllm-project/vllm")
    assert vllm["values"] == ["inf", 12.5] and vllm["value"] == "inf"
    assert vllm["series_extra_info"]["benchmark"]["args"]["tensor_parallel_size"] == 1
    accuracy = next(row for row in found if row["metric"] == "accuracy")
    assert accuracy["string_values"] == ["pass"] and accuracy["value"] is None


@pytest.mark.parametrize(
    ("query", "count"),
    [
        ("?repo=pytorch/ao", 7),
        ("?repo=pytorch/ao&branch=main", 6),
        ("?sha=" + "2" * 40, 3),
        ("?benchmark=TorchInductor", 2),
        ("?model=int8wo-2048-2048-2048", 2),
        ("?backend=inductor", 2),
        ("?mode=training", 2),
        ("?dtype=int8wo", 5),
        ("?device=cuda&arch=NVIDIA H100 80GB HBM3", 6),
        ("?metric=median_itl_ms", 1),
        ("?since=2025-10-09T08:53:21Z&until=2025-10-09T08:53:22Z", 3),
        ("?repo=nobody/none", 0),
    ],
)
def test_filters(api, history, query, count):
    assert len(rows(api, query)) == count


def test_cursor_pagination(api, history):
    first = api.get("/api/v3/results?limit=3").json()
    assert len(first["results"]) == 3 and first["next"]
    second = api.get(first["next"]).json()
    ids = {row["id"] for row in first["results"]} | {row["id"] for row in second["results"]}
    assert len(ids) == 6


def test_csv_streams_every_matching_row(api, history):
    response = api.get("/api/v3/results?format=csv&repo=pytorch/ao&limit=1")
    assert response.status_code == 200 and response["Content-Type"] == "text/csv"
    text = b"".join(response.streaming_content).decode()
    table = list(csv.DictReader(io.StringIO(text)))
    assert len(table) == 7
    assert {row["metric"] for row in table} == {"Fwd Speedup (x)", "accuracy"}
    assert next(r for r in table if r["metric"] == "accuracy")["string_values"] == '["pass"]'


def test_csv_keeps_infinities(api, history):
    response = api.get("/api/v3/results?format=csv&repo=vllm-project/vllm")
    row = next(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert row["values"] == '["inf",12.5]' and math.isinf(float(row["value"]))


def test_csv_quotes_names_a_spreadsheet_would_run(api, db):
    formula = '=HYPERLINK("https://evil.example","click")'
    upload([record(**META, model={"name": formula})])
    response = api.get("/api/v3/results?format=csv")
    [row] = csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()))
    assert row["model"] == "'" + formula
    assert api.get("/api/v3/results").json()["results"][0]["model"] == formula


def test_a_csv_streams_every_row_a_chunk_at_a_time(api, history, monkeypatch):
    """Chunks of 3 rows after the last one read (rows sharing a timestamp too): every row
    once, newest first, as the JSON lists them."""
    from benchsite.results import api_query

    monkeypatch.setattr(api_query, "CSV_CHUNK", 3)
    response = api.get("/api/v3/results?format=csv")
    ids = [int(row["id"]) for row in
           csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()))]
    assert ids == [row["id"] for row in rows(api, "?limit=100")] and len(ids) == 8


def test_results_query_count_does_not_grow_with_rows(api, history, django_assert_max_num_queries):
    with django_assert_max_num_queries(1):
        api.get("/api/v3/results?limit=100")


def test_runs(api, history):
    response = api.get("/api/v3/runs?repo=pytorch/ao&branch=main")
    runs = response.json()["results"]
    assert [run["head_sha"] for run in runs] == ["2" * 40, "1" * 40]
    assert runs[0]["result_count"] == 3 and "identity" not in runs[0]
    detail = api.get(f"/api/v3/runs/{runs[0]['id']}").json()
    assert detail["device"] == "cuda"


def test_upload_detail(api, history):
    from benchsite.results.models import Upload

    last = Upload.objects.latest("id")
    body = api.get(f"/api/v3/uploads/{last.pk}").json()
    assert body["record_count"] == 1 and body["repos"] == ["vllm-project/vllm"]
    assert len(body["runs"]) == 1


def test_schema_and_docs(api, db):
    schema = api.get("/api/schema/")
    assert schema.status_code == 200
    text = schema.content.decode()
    assert "/api/v3/results" in text and "upload_results" in text
    docs = api.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()
