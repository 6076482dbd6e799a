"""POST /api/v3/results: every accepted shape and every refusal."""

import gzip
import json
import math
import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from benchsite.results.ingest import upload as upload_module
from benchsite.results.ingest.store import SERIES_IDS
from benchsite.results.models import Result, Run, Series, Upload, UploadToken
from tests.results.samples import INDUCTOR_ACCURACY, META, MINIMAL, TORCHAO, VLLM, record

URL = "/api/v3/results"


def post(api, token, body, query="", **headers):
    if not isinstance(body, bytes):
        body = json.dumps(body).encode()
    headers = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
    if token:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return api.generic("POST", URL + query, body, content_type="application/json", **headers)


def stored_counts():
    return (Upload.objects.count(), Run.objects.count(), Series.objects.count(),
            Result.objects.count())


@pytest.fixture
def token(make_token):
    return make_token("pytorch/ao", "vllm-project/*")


def test_json_list_is_stored_with_run_and_series(api, token):
    records = [record(**META), record(**META, metric={**TORCHAO["metric"],
                                                      "name": "Bfloat16 Fwd Time (ms)",
                                                      "benchmark_values": [0.5, 0.7, 0.6]})]
    response = post(api, token, records)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["records"] == 2 and body["created"] is True
    run = Run.objects.get()
    assert (run.repo, run.head_branch, run.head_sha, run.workflow_id, run.job_id) == (
        "pytorch/ao", "main", "a" * 40, 1001, 2002)
    assert run.result_count == 2 and run.timestamp.timestamp() == META["timestamp"]
    series = Series.objects.get(metric="Fwd Speedup (x)")
    assert (series.benchmark, series.dtype, series.model, series.suite, series.device,
            series.arch) == ("micro-benchmark api", "int8wo", "int8wo-1024-1024-1024",
                             "torchao", "cuda", "NVIDIA H100 80GB HBM3")
    assert series.extra_info["benchmark"]["torch_compile_mode"] == "max-autotune"
    timing = Result.objects.get(series__metric="Bfloat16 Fwd Time (ms)")
    assert timing.values == [0.5, 0.7, 0.6] and timing.value == 0.6
    assert Upload.objects.get().payload() == json.dumps(records).encode()


def test_single_object(api, token):
    response = post(api, token, record(**META))
    assert response.status_code == 201
    assert Result.objects.get().value == 1.25


def test_json_lines_with_query_metadata(api, token):
    lines = "\n".join(json.dumps(record()) for _ in range(2)) + "\n\n"
    lines = lines.replace('"Fwd Speedup (x)"', '"m"', 1)
    response = post(api, token, lines.encode(),
                    "?repo=pytorch/ao&head_branch=main&head_sha=abc&workflow_id=7&timestamp=5")
    assert response.status_code == 201, response.json()
    assert response.json()["records"] == 2
    run = Run.objects.get()
    assert (run.head_sha, run.workflow_id, run.timestamp.timestamp()) == ("abc", 7, 5)


def test_record_fields_win_over_request_metadata(api, token):
    response = post(api, token, [record(**META)], "?head_sha=other&head_branch=x")
    assert response.status_code == 201
    assert Run.objects.get().head_sha == "a" * 40


def test_gzip_body(api, token):
    body = gzip.compress(json.dumps([record(**META)]).encode())
    response = post(api, token, body, content_encoding="gzip")
    assert response.status_code == 201, response.json()
    assert bytes(Upload.objects.get().payload_gzip) == body


def test_a_gzip_body_of_several_members_is_read_whole(api, token):
    """`cat a.jsonl.gz b.jsonl.gz` is one gzip stream of two members: both are read (the
    first alone would drop the second's records without a word)."""
    lines = [json.dumps(record(**META, model={"name": name})).encode() + b"\n"
             for name in ("first", "second")]
    body = gzip.compress(lines[0]) + gzip.compress(lines[1]) + b"\0" * 8
    response = post(api, token, body, content_encoding="gzip")
    assert response.status_code == 201, response.json()
    assert response.json()["records"] == 2
    assert set(Series.objects.values_list("model", flat=True)) == {"first", "second"}
    truncated = gzip.compress(lines[0]) + gzip.compress(lines[1])[:-12]
    response = post(api, token, truncated, content_encoding="gzip")
    assert response.json()["errors"] == ["body: not valid gzip: truncated gzip stream"]


def test_envelope_metadata(api, token):
    envelope = {"metadata": META, "records": [record(), record(MINIMAL)]}
    response = post(api, token, envelope)
    assert response.status_code == 201, response.json()
    assert Run.objects.get().name == "nightly"
    minimal = Result.objects.get(series__benchmark="executorch")
    assert minimal.repetitions == [3.5]
    assert (minimal.series.device, minimal.series.mode) == ("cpu", "")


def test_inductor_string_accuracy(api, token):
    response = post(api, token, [record(INDUCTOR_ACCURACY, **META)])
    assert response.status_code == 201, response.json()
    result = Result.objects.get()
    assert result.string_values == ["pass"]
    assert result.repetitions == [] and result.value is None and result.target is None
    assert result.series.backend == "inductor" and result.series.suite == "torchbench"


def test_vllm_nested_extra_info_and_inf(api, token):
    response = post(api, token, [record(VLLM, **{**META, "repo": "vllm-project/vllm"})])
    assert response.status_code == 201, response.json()
    result = Result.objects.select_related("series", "run").get()
    assert math.isinf(result.values[0]) and result.values[1] == 12.5
    assert result.target == 10
    assert result.extra_info == {"unit": "ms"}
    assert (result.series.device, result.series.arch) == ("cuda", "NVIDIA H100 80GB HBM3")
    args = result.series.extra_info["benchmark"]["args"]
    assert args["nested"]["depth"]["ok"] == 1.5 and args["max_num_seqs"] is None
    assert result.run.dependencies["torch"]["version"] == "2.13.0"
    assert result.run.runners[0]["extra_info"] == {"driver": "550"}


def test_bare_nan_and_infinity_tokens(api, token):
    body = json.dumps([record(**META, metric={"name": "x", "benchmark_values":
                                              [float("nan"), float("inf"), 2.0]})])
    assert "NaN" in body
    response = post(api, token, body.encode())
    assert response.status_code == 201, response.json()
    result = Result.objects.get()
    assert math.isnan(result.values[0]) and result.value == math.inf


def test_unknown_fields_are_kept(api, token):
    item = record(**META, servicelab_trial_id=9, custom_top={"a": 1})
    item["model"]["weird"] = "kept"
    item["metric"]["extra_info"]["note"] = float("inf")
    response = post(api, token, [item])
    assert response.status_code == 201
    result = Result.objects.get()
    assert result.unknown == {"custom_top": {"a": 1}, "model.weird": "kept"}
    assert result.extra_info == {"unit": "x", "note": "inf"}
    assert result.run.extra == {"servicelab_trial_id": 9}


def test_repeat_returns_first_upload(api, token):
    first = post(api, token, [record(**META)])
    again = post(api, token, [record(**META)])
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == {**first.json(), "created": False}
    assert stored_counts() == (1, 1, 1, 1)


def test_idempotency_key(api, token):
    first = post(api, token, [record(**META)], idempotency_key="job-1")
    again = post(api, token, [record(**META)], idempotency_key="job-1")
    assert again.status_code == 200 and again.json()["upload_id"] == first.json()["upload_id"]
    other = post(api, token, [record(**{**META, "head_sha": "b" * 40})], idempotency_key="job-1")
    assert other.status_code == 409
    assert "job-1" in other.json()["errors"][0]
    # the key is checked before the body is refused (the body is read while it is hashed)
    unreadable = post(api, token, b"[{", idempotency_key="job-1")
    assert unreadable.status_code == 409 and "job-1" in unreadable.json()["errors"][0]
    assert post(api, token, b"[{", idempotency_key="job-2").status_code == 400
    assert stored_counts() == (1, 1, 1, 1)


def test_second_run_reuses_series(api, token):
    post(api, token, [record(**META)])
    response = post(api, token, [record(**{**META, "head_sha": "b" * 40, "workflow_id": 2})])
    assert response.status_code == 201
    assert (Run.objects.count(), Series.objects.count(), Result.objects.count()) == (2, 1, 2)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"[{not json", "body: invalid JSON"),
        (b"", "body: empty"),
        (b"42", "body: expected a JSON list or object"),
        (b'{"a": 1}\n{broken\n', "body: line 2: invalid JSON"),
        ([record(**META, model={"type": "x"})], "records[0].model.name: required"),
        ([record(**META, benchmark={"name": 5})],
         "records[0].benchmark.name: expected a string, got int"),
        ([record(**META, metric={"name": "m", "benchmark_values": ["fast"]})],
         "records[0].metric.benchmark_values[0]: expected a number, got a string 'fast'"),
        ([record(**META, metric={"name": "m", "benchmark_values": []})],
         "records[0].metric.benchmark_values: at least one value is required"),
        ([record(**{**META, "workflow_id": "seven"})],
         "records[0].workflow_id: expected an integer, got a string 'seven'"),
        ([record(**{**META, "repo": "no-slash"})],
         "records[0].repo: 'no-slash' is not a repo: expected OWNER/NAME as on GitHub"),
        ([record(**{**META, "head_sha": None})], "records[0].head_sha: required"),
        ([record(**META, runners="h100")], "records[0].runners: expected a list of objects"),
        (["just a string"], "records[0]: expected an object, got a string"),
        ({"metadata": META, "records": []}, "records: no records in the upload"),
    ],
)
def test_refusals_name_the_problem_and_write_nothing(api, token, body, expected):
    response = post(api, token, body)
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert any(error.startswith(expected) for error in errors), errors
    assert stored_counts() == (0, 0, 0, 0)


def test_every_problem_is_listed_and_a_partly_bad_upload_writes_nothing(api, token):
    records = [record(**META), record(**META, model={}), record(**META, metric={"name": "m"})]
    response = post(api, token, records)
    assert response.status_code == 400
    assert response.json()["errors"] == [
        "records[1].model.name: required",
        "records[2].metric.benchmark_values: at least one value is required (numbers in "
        "metric.benchmark_values or strings in metric.extra_info.benchmark_values)",
    ]
    assert stored_counts() == (0, 0, 0, 0)


def test_missing_token_wrong_token_and_other_repo(api, token, make_token):
    assert post(api, None, [record(**META)]).status_code == 401
    assert post(api, "bst_wrong", [record(**META)]).status_code == 401
    other = post(api, make_token("someone/else"), [record(**META)])
    assert other.status_code == 403
    assert "pytorch/ao" in other.json()["errors"][0]
    assert stored_counts() == (0, 0, 0, 0)


def test_revoked_token(api, token):
    UploadToken.objects.update(is_active=False)
    assert post(api, token, [record(**META)]).status_code == 401


@override_settings(BENCH_UPLOAD_MAX_BYTES=2000, DATA_UPLOAD_MAX_MEMORY_SIZE=2000)
def test_oversize_body_is_413_with_the_limit(api, token):
    response = post(api, token, [record(**META)] * 10)
    assert response.status_code == 413
    assert "2000 bytes" in response.json()["errors"][0]
    bomb = gzip.compress(json.dumps([record(**META)] * 50).encode())
    assert len(bomb) < 2000
    assert post(api, token, bomb, content_encoding="gzip").status_code == 413
    assert stored_counts() == (0, 0, 0, 0)


def test_bad_gzip_and_unknown_encoding(api, token):
    for body, problem in [(b"not gzip", "no gzip header"),
                          (gzip.compress(b"[]")[:-12], "truncated gzip stream"),
                          (b"\x1f\x8b" + b"\xff" * 30, "Error -5 ")]:
        response = post(api, token, body, content_encoding="gzip")
        assert response.status_code == 400
        assert response.json()["errors"][0].startswith(f"body: not valid gzip: {problem}")
    assert post(api, token, b"[]", content_encoding="br").status_code == 415


def test_create_upload_token_command(api, db, capsys):
    call_command("create_upload_token", "--repo", "pytorch/ao")
    secret = capsys.readouterr().out.strip()
    assert secret.startswith("bst_")
    assert post(api, secret, [record(**META)]).status_code == 201

    assert UploadToken.objects.get().digest == UploadToken.hash(secret)  # stored hashed


def test_series_ids_are_cached_only_after_commit(api, token, django_capture_on_commit_callbacks):
    SERIES_IDS.clear()
    with django_capture_on_commit_callbacks(execute=False):
        post(api, token, [record(**META)])
    series = Series.objects.get()
    assert SERIES_IDS.get((connection.alias, series.identity)) is None, "cached before commit"
    with django_capture_on_commit_callbacks(execute=True):
        post(api, token, [record(**{**META, "head_sha": "b" * 40})])
    # SQLite cannot tell when cached ids go stale (`Store.cache_token`): it caches none.
    cached = series.id if connection.vendor == "postgresql" else None
    assert SERIES_IDS.get((connection.alias, series.identity)) == cached
    SERIES_IDS.clear()


def test_series_id_cache_survives_deleted_series(api, token, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        post(api, token, [record(**META)])
    Series.objects.all().delete()  # also what a flushed test database looks like
    post(api, token, [record(**{**META, "head_sha": "b" * 40})])
    result = Result.objects.select_related("series").get()
    assert result.series.model == "int8wo-1024-1024-1024"
    SERIES_IDS.clear()


def test_free_memory_readings_do_not_split_a_run(api, token):
    runner = {"name": "cuda", "type": "NVIDIA H100 80GB HBM3", "avail_mem_in_gb": 100}
    first = record(**META, runners=[runner])
    second = record(**META, runners=[{**runner, "avail_mem_in_gb": 97}],
                    model={"name": "other"})
    assert post(api, token, [first, second]).status_code == 201
    assert Run.objects.get().result_count == 2


def test_results_are_rederived_from_the_raw_payload(api, token, capsys):
    response = post(api, token, [record(TORCHAO)], "?repo=pytorch/ao&head_branch=main&head_sha=s")
    upload_id = response.json()["upload_id"]
    original = Result.objects.get()
    Result.objects.update(value=0.0, values=[0.0])  # e.g. a bug in an earlier normaliser
    call_command("rederive_uploads", str(upload_id))
    assert f"upload {upload_id}: 1 results" in capsys.readouterr().out
    again = Result.objects.get()
    assert again.value == 1.25 and again.timestamp == original.timestamp
    assert Run.objects.get().result_count == 1


def test_records_without_a_time_take_the_uploads_even_when_storing_takes_a_second(
        api, token, monkeypatch):
    """The time a record without one gets is the upload's `created_at`, which `rederive`
    gives it again: not a second earlier when the upload row is written later."""
    made = upload_module.ensure_months
    monkeypatch.setattr(upload_module, "ensure_months",
                        lambda *args: (time.sleep(1.0), made(*args)))  # before the row
    post(api, token, [record(TORCHAO)], "?repo=pytorch/ao&head_branch=main&head_sha=s")
    created = Upload.objects.get().created_at
    assert Result.objects.get().timestamp == created.replace(microsecond=0)


def test_a_tokens_last_use_is_written_at_most_once_a_minute(api, token):
    post(api, token, [record(**META)])
    used = UploadToken.objects.get().last_used_at
    assert used is not None
    with CaptureQueriesContext(connection) as queries:
        post(api, token, [record(**{**META, "head_sha": "b" * 40})])
    assert not [q for q in queries if q["sql"].startswith('UPDATE "results_uploadtoken"')]
    UploadToken.objects.update(last_used_at=used - timedelta(minutes=2))
    post(api, token, [record(**{**META, "head_sha": "c" * 40})])
    assert UploadToken.objects.get().last_used_at > used
