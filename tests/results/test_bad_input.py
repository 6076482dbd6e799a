"""Hostile and odd input answers 400 naming the place and the problem: nothing is written,
and the server keeps serving (each case ends with an upload that is stored)."""

import io
import json
import re

import pytest

from benchsite.results.ingest import UploadRefused, checks, store_upload
from benchsite.results.models import Result, Run, Series, Upload
from tests.results.samples import META, record

URL = "/api/v3/results"


def post(api, token, body, query="", **extra):
    if not isinstance(body, bytes):
        body = json.dumps(body).encode()
    return api.generic("POST", URL + query, body, content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {token}", **extra)


def stored():
    return (Upload.objects.count(), Run.objects.count(), Series.objects.count(),
            Result.objects.count())


@pytest.fixture
def token(make_token):
    return make_token("pytorch/ao")


@pytest.fixture
def refused(api, token):
    """Posts a body, checks it is a 400 listing `expected` among its errors with nothing
    stored, then that a good upload is still stored."""

    def check(body, *expected: str, query: str = "", **extra) -> list[str]:
        before = stored()
        response = post(api, token, body, query, **extra)
        assert response.status_code == 400, response.content
        errors = response.json()["errors"]
        for text in expected:
            assert any(text in error for error in errors), (text, errors)
        assert stored() == before
        good = post(api, token, [record(**{**META, "name": f"after {len(errors)} {before}"})])
        assert good.status_code == 201, good.content
        return errors

    return check


def escaped(records) -> bytes:
    """The JSON of `records` as Python writes it: non-ASCII text as \\u escapes, which is
    how a NUL or a lone surrogate reaches the server."""
    return json.dumps(records).encode()


@pytest.mark.parametrize("where, make", [
    ("records[0].model.name", lambda: record(**META, model={"name": "a\0b"})),
    ("records[0].benchmark.extra_info.note",
     lambda: record(**META, benchmark={"name": "b", "extra_info": {"note": "\0"}})),
    ("records[0].metric.extra_info.'k\\x00': the key",
     lambda: record(**META, metric={"name": "m", "benchmark_values": [1.0],
                                    "extra_info": {"k\0": 1}})),
    ("records[0].notes[0]", lambda: record(**META, notes=["x\0"])),
    ("records[0].head_sha", lambda: record(**{**META, "head_sha": "a\0"})),
])
def test_a_nul_character_in_a_string(refused, where, make):
    refused(escaped([make()]), f"{where} contains a NUL character" if "key" in where
            else f"{where}: contains a NUL character")


def test_a_nul_character_in_a_query_parameter(api, token):
    """Refused before the upload is read, as on every endpoint (benchsite.control_characters);
    a NUL that reaches the metadata another way is refused by ingestion (the CLI)."""
    meta = {key: value for key, value in META.items() if key != "head_sha"}
    before = stored()
    response = post(api, token, [record(**meta)], "?head_sha=ab%00c")
    assert response.status_code == 400 and response.json()["parameter"] == "head_sha"
    assert stored() == before
    assert post(api, token, [record(**META)]).status_code == 201
    with pytest.raises(UploadRefused) as refused:
        store_upload(json.dumps([record(**meta)]).encode(), metadata={"head_sha": "ab\0c"})
    assert any("head_sha (from the request): contains a NUL character" in error
               for error in refused.value.errors)


@pytest.mark.parametrize("where, make", [
    ("records[0].model.name", lambda: record(**META, model={"name": "a\ud800"})),
    ("records[0].inputs.x[1]", lambda: record(**META, inputs={"x": [1, "\udc00z"]})),
])
def test_a_lone_surrogate_in_a_string(refused, where, make):
    errors = refused(escaped([make()]), f"{where}: contains a lone UTF-16 surrogate")
    assert all(error.isprintable() for error in errors)


def test_a_surrogate_pair_is_text(api, token):
    response = post(api, token, escaped([record(**META, model={"name": "speed \U0001F680"})]))
    assert response.status_code == 201
    assert Series.objects.get().model == "speed \U0001F680"


@pytest.mark.parametrize("where, value, make", [
    ("records[0].benchmark.extra_info.count", 2**70,
     lambda v: record(**META, benchmark={"name": "b", "extra_info": {"count": v}})),
    ("records[0].runners[0].memory", -2**64,
     lambda v: record(**META, runners=[{"name": "cpu", "memory": v}])),
    ("records[0].job_id", 2**64, lambda v: record(**{**META, "job_id": v})),
    ("records[0].run_attempt", 2**63, lambda v: record(**{**META, "run_attempt": v})),
    ("records[0].model.extra_info.n", 10**2000,
     lambda v: record(**META, model={"name": "m", "extra_info": {"n": v}})),
])
def test_an_integer_over_64_bits(refused, where, value, make):
    shown = value if value.bit_length() <= 256 else f"an integer of {value.bit_length()} bits"
    refused([make(value)], f"{where}: {shown} is beyond the 64-bit range")


def test_an_integer_value_over_64_bits_is_a_float_measurement(api, token):
    response = post(api, token, [record(**META, metric={"name": "m",
                                                        "benchmark_values": [2**70]})])
    assert response.status_code == 201
    assert Result.objects.get().value == float(2**70)
    huge = json.dumps([record(**META)]).replace('[1.25]', "[1" + "0" * 400 + "]").encode()
    assert post(api, token, huge).status_code == 400


def nested(depth: int):
    """A value of `depth` nested lists."""
    value = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_a_100000_deep_nesting(refused):
    body = b"[" * 100_000 + b"]" * 100_000
    refused(body, f"body: invalid JSON: nested deeper than {checks.MAX_DEPTH} levels")
    refused(b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "nested deeper than")


def test_nesting_is_refused_past_what_the_store_writes(api, token, refused):
    # record (1) > benchmark (2) > extra_info (3) > deep (4...)
    deepest = record(**META, benchmark={"name": "b", "extra_info": {
        "deep": nested(checks.MAX_DEPTH - 3)}})
    assert post(api, token, [deepest]).status_code == 201
    too_deep = record(**META, benchmark={"name": "b2", "extra_info": {
        "deep": nested(checks.MAX_DEPTH - 2)}})
    refused([too_deep], f"nested deeper than {checks.MAX_DEPTH} levels")


@pytest.mark.parametrize("value, expected", [
    (10**14, "timestamp: 100000000000000 is out of range: Unix seconds go from 0 to "
             "253370764800, from 1970-01-01 to 9999-01-01 (UTC) (milliseconds? send seconds)"),
    (-1, "timestamp: -1 is out of range"),
    ("1e400", "timestamp: inf is out of range"),
    (2**70, "timestamp: 1180591620717411303424 is beyond the 64-bit range"),
    ("9999-12-31T23:00:00-05:00", "timestamp: 9999-12-31T23:00:00-05:00 is out of range"),
    ("2025-01-01T00:00:00+16:00", "timestamp: time-zone offset +16:00 is beyond ±15:59"),
])
def test_a_timestamp_out_of_range(refused, value, expected):
    refused([record(**{**META, "timestamp": value})], expected)


def test_a_workflow_id_of_2_to_the_70(refused):
    refused([record(**{**META, "workflow_id": 2**70})],
            "records[0].workflow_id: 1180591620717411303424 is beyond the 64-bit range; send it")
    refused([record(**{**META, "workflow_id": str(2**70)})],
            "records[0].workflow_id: 1180591620717411303424 is beyond the 64-bit range: "
            "integers go from -9223372036854775808 to 9223372036854775807")
    meta = {key: value for key, value in META.items() if key != "workflow_id"}
    refused([record(**meta)], "workflow_id (from the request): 1180591620717411303424 is",
            query=f"?workflow_id={2**70}")


def test_a_5000_character_idempotency_key(refused):
    refused([record(**META)], "Idempotency-Key: expected at most 200 printable characters, "
            "got 5000 characters", HTTP_IDEMPOTENCY_KEY="k" * 5000)
    refused([record(**META)], "with control ones", HTTP_IDEMPOTENCY_KEY="k\0")


def test_a_chunked_upload_is_read(api, token):
    body = json.dumps([record(**META)]).encode()
    # What gunicorn hands Django for `Transfer-Encoding: chunked`: the decoded body as a
    # stream it ends, and no CONTENT_LENGTH.
    response = post(api, token, body, HTTP_TRANSFER_ENCODING="chunked", CONTENT_LENGTH="",
                    **{"wsgi.input": io.BytesIO(body), "wsgi.input_terminated": True})
    assert response.status_code == 201, response.content
    assert response.json()["records"] == 1
    assert Upload.objects.get().payload() == body


def test_a_chunked_upload_over_the_limit(api, token, settings):
    settings.BENCH_UPLOAD_MAX_BYTES = 100
    body = json.dumps([record(**META)]).encode()
    response = post(api, token, body, HTTP_TRANSFER_ENCODING="chunked", CONTENT_LENGTH="",
                    **{"wsgi.input": io.BytesIO(body), "wsgi.input_terminated": True})
    assert response.status_code == 413
    assert not Upload.objects.exists()


def test_a_chunked_upload_a_server_cannot_end_asks_for_a_length(api, token):
    body = json.dumps([record(**META)]).encode()
    response = post(api, token, body, HTTP_TRANSFER_ENCODING="chunked", CONTENT_LENGTH="",
                    **{"wsgi.input": io.BytesIO(body)})
    assert response.status_code == 411
    assert "send Content-Length" in response.json()["errors"][0]


@pytest.mark.parametrize("url", [
    "/api/v3/results?since=2024-01-01T00:00:00%2B16:00",
    "/api/v3/results?format=csv&until=2024-01-01T00:00:00-16:30",
    "/api/v3/runs?since=2024-01-01T00:00:00%2B23:59",
])
def test_a_time_zone_offset_beyond_15_59_in_an_api_filter(api, url):
    response = api.get(url)
    assert response.status_code == 400
    assert "is beyond ±15:59" in json.dumps(response.json(), ensure_ascii=False)


@pytest.mark.parametrize("url, name", [
    ("/trends/?start=2024-01-01T00:00:00%2B16:00", "start"),
    ("/trends/?start=2024-01-01&end=9999-12-31", "end"),
    ("/explorer/?start=0001-01-01T00:00:00%2B01:00", "start"),
])
def test_a_time_out_of_reach_in_a_page_filter(client, db, url, name):
    """A page falls back with a note (issue 15: a page never dead-ends); its JSON refuses
    the value by name."""
    page = client.get(url)
    assert page.status_code == 200
    assert re.search(r"(refused|out of range)", page.content.decode())
    refused = client.get(url + "&format=json")
    assert refused.status_code == 400
    assert refused.json()["parameter"] == name and refused.json()["error"].startswith(name)


def test_a_nul_character_in_a_page_filter(client, db):
    page = client.get("/regressions/reports/?repo=a%00")
    assert page.status_code == 400
    assert "repo: contains a control character (such as NUL)" in page.content.decode()
    refused = client.get("/regressions/reports/?repo=a%00&format=json")
    assert refused.status_code == 400
    assert refused.json()["error"].startswith("repo: contains a control character")


def test_a_day_out_of_reach_in_the_regressions_filter(client, db):
    response = client.get("/regressions/?end=9999-12-31")
    assert response.status_code < 500
    assert "out of range" in response.content.decode()


@pytest.mark.parametrize("spec", ["jobs", "[1, 2]", "~", "42"])
def test_a_job_spec_that_is_not_a_mapping(api, make_token, spec):
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token('pytorch/ao')}")
    response = api.post("/api/v3/jobs", {"spec": spec, "queue": "cpu"}, format="json")
    assert response.status_code == 400
    assert "the spec must be a mapping of keys to values" in json.dumps(response.json())


@pytest.mark.parametrize("url, name", [
    (f"/api/v3/runs?workflow_id={2**70}", "workflow_id"),
    (f"/api/v3/runs?job_id=-{2**63 + 1}", "job_id"),
    (f"/api/v3/results?run={2**64}", "run"),
    ("/api/v3/results?upload=1e400", "upload"),
    ("/api/v3/results?run=1.5", "run"),
    ("/api/v3/results?since=2024-13-45", "since"),
    ("/api/v3/results?until=0001-01-01T00:00:00%2B01:00", "until"),
    ("/api/v3/runs?since=9999-12-31T23:59:59-01:00", "since"),
    ("/api/v3/runs?until=1969-12-31", "until"),
])
def test_numbers_beyond_bigint_and_odd_dates_in_query_filters(api, url, name):
    response = api.get(url)
    assert response.status_code == 400, response.content
    assert list(response.json()) == [name]


def test_numbers_within_bigint_still_filter(api, token):
    post(api, token, [record(**META)])
    run = Run.objects.get()
    found = api.get(f"/api/v3/runs?workflow_id={META['workflow_id']}&job_id={2**63 - 1}")
    assert found.status_code == 200 and found.json()["results"] == []
    assert api.get(f"/api/v3/results?run={run.pk}").json()["results"][0]["run_id"] == run.pk


def test_a_nul_character_in_a_compare_parameter(api):
    response = api.get("/api/v3/compare?repo=a%00&base=b&head=c")
    assert response.status_code == 400
    assert response.json()["parameter"] == "repo"
