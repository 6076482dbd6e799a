"""An upload is stored a part at a time (`ingest.upload.PART` records), the database writing
one part while the next is read: what it stores must not depend on the parts, and a problem
in a later part must still store nothing."""

import json

import pytest

from benchsite.results.ingest import upload as ingest_upload
from benchsite.results.models import Result, Run, RunSummary, Series, Upload
from tests.results.samples import INDUCTOR_ACCURACY, META, VLLM, record
from tests.results.test_upload_api import post, stored_counts


@pytest.fixture
def token(make_token):
    return make_token("pytorch/ao", "vllm-project/*")


def tricky_records():
    """Records of two runs taking turns, series seen again in later parts, the general path's
    quirks ("inf", unknown fields), string results, and a run whose earliest record (its
    start) comes in the last part."""
    records = []
    for index in range(7):
        sha = "a" * 40 if index % 2 else "b" * 40
        run = {**META, "head_sha": sha, "timestamp": META["timestamp"] - index * 60}
        records.append(record(**run, metric={"name": f"m{index % 3}",
                                             "benchmark_values": [1.0 + index, 2.5],
                                             "extra_info": {"unit": "ms"}}))
        records.append(record(VLLM, **{**run, "repo": "vllm-project/vllm"}))
        records.append(record(INDUCTOR_ACCURACY, **run, surprise={"kept": index}))
    return records


def stored():
    """What is stored, by identities rather than ids."""
    results = sorted(
        (r.series.identity, r.run.identity, r.timestamp, r.value, r.values, r.target,
         r.string_values, r.extra_info, r.unknown)
        for r in Result.objects.select_related("series", "run"))
    runs = sorted(Run.objects.values_list("identity", "timestamp", "result_count", "repo"))
    summaries = sorted(
        (summary.pop("run__identity"), sorted(summary.items()))
        for summary in RunSummary.objects.values("run__identity", "timestamp", "benchmark",
                                                 "metric", "count", "log_count", "log_sum",
                                                 "string_count", "pass_count"))
    uploads = list(Upload.objects.values_list("record_count", "repos"))
    return results, runs, summaries, uploads, Series.objects.count()


def test_parts_store_what_one_part_stores(api, token, monkeypatch):
    body = json.dumps(tricky_records()).encode()
    assert post(api, token, body).status_code == 201  # one part
    whole = stored()
    for model in (Result, RunSummary, Run, Series, Upload):
        model.objects.all().delete()
    monkeypatch.setattr(ingest_upload, "PART", 4)
    assert post(api, token, body).status_code == 201  # six parts
    assert stored() == whole
    results, runs, _, uploads, _ = whole
    assert len(results) == 21 and uploads == [(21, ["pytorch/ao", "vllm-project/vllm"])]
    assert min(timestamp for _, timestamp, *_ in runs).timestamp() == META["timestamp"] - 360


@pytest.mark.parametrize(
    ("last", "status", "expected"),
    [
        (record(**META, model={}), 400, ["records[8].model.name: required"]),
        (record(**{**META, "repo": "someone/else"}), 403,
         ["repo 'someone/else': token 'ci' may upload only for ['pytorch/ao', "
          "'vllm-project/*']"]),
    ],
)
def test_a_refusal_in_a_later_part_stores_nothing(api, token, monkeypatch, last, status,
                                                   expected):
    monkeypatch.setattr(ingest_upload, "PART", 2)
    response = post(api, token, [*tricky_records()[:8], last])
    assert (response.status_code, response.json()["errors"]) == (status, expected)
    assert stored_counts() == (0, 0, 0, 0)


def test_a_problem_comes_before_a_forbidden_repo(api, token, monkeypatch):
    monkeypatch.setattr(ingest_upload, "PART", 2)
    records = [*tricky_records()[:4], record(**{**META, "repo": "someone/else"}),
               *tricky_records()[:4], record(**META, model={})]
    response = post(api, token, records)
    assert (response.status_code, response.json()["errors"]) == (
        400, ["records[9].model.name: required"])
    assert stored_counts() == (0, 0, 0, 0)


def test_a_line_that_is_not_json_in_a_later_part(api, token, monkeypatch):
    """Read while the database writes the part before (on PostgreSQL, inside the COPY)."""
    monkeypatch.setattr(ingest_upload, "PART", 2)
    lines = [json.dumps(item).encode() for item in tricky_records()[:5]]
    response = post(api, token, b"\n".join([*lines, b"{broken"]))
    errors = response.json()["errors"]
    assert response.status_code == 400 and len(errors) == 1, errors
    assert errors[0].startswith("body: line 6: invalid JSON"), errors
    assert stored_counts() == (0, 0, 0, 0)


@pytest.mark.parametrize(("parts_up_to", "writes"), [(10**6, True), (100, False)])
def test_a_body_over_the_parts_limit_is_read_whole_before_any_write(
        api, token, monkeypatch, parts_up_to, writes):
    """So that a bad record at the end of a large body wastes no writing."""
    monkeypatch.setattr(ingest_upload, "PART", 2)
    monkeypatch.setattr(ingest_upload, "PARTS_UP_TO", parts_up_to)
    saves, save = [], Upload.save

    def counted_save(upload, *args, **kwargs):
        saves.append(upload)
        return save(upload, *args, **kwargs)

    monkeypatch.setattr(Upload, "save", counted_save)
    response = post(api, token, [*tricky_records()[:8], record(**META, model={})])
    assert response.status_code == 400
    assert bool(saves) is writes
