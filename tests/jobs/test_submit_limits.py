"""Issue 34: a job or bisect submission's body is limited (setting DATA_UPLOAD_MAX_MEMORY_SIZE,
BENCH_REQUEST_MAX_BYTES) before anything parses it: a 50 MB spec is a short 413 within
seconds, whether the sender is allowed to submit or not; a spec under the limit is still
parsed."""

import json
import time

import pytest
from django.conf import settings

from benchsite.jobs.models import Job

SPEC = "name: big\nbenchmarks:\n" + "  - {name: x, shape: [1, 2, 3]}\n" * 1_700_000


@pytest.mark.parametrize("url", ["/api/v3/jobs", "/api/v3/bisects"])
@pytest.mark.parametrize("authorized", [True, False])
def test_a_50_mb_spec_is_a_short_413_within_5_seconds(api, make_token, url, authorized):
    body = json.dumps({"spec": SPEC, "queue": "cpu", "kind": "ab"}).encode()
    assert len(body) > 50_000_000
    headers = {"HTTP_AUTHORIZATION": f"Bearer {make_token('pytorch/ao')}"} if authorized else {}
    started = time.perf_counter()
    response = api.generic("POST", url, body, content_type="application/json", **headers)
    assert time.perf_counter() - started < 5
    assert response.status_code == 413
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    assert response.json()["limit_bytes"] == limit
    assert f"limit of {limit} bytes" in response.json()["errors"][0]
    assert len(response.content) < 300 and b"benchmarks" not in response.content
    assert not Job.objects.exists()


def test_a_spec_under_the_body_limit_is_still_parsed(api, make_token):
    response = api.post("/api/v3/jobs", {"spec": "not: [a spec", "queue": "cpu"},
                        format="json", HTTP_AUTHORIZATION=f"Bearer {make_token('pytorch/ao')}")
    assert response.status_code == 400
    assert "spec" in response.json()
