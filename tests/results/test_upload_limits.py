"""Issue 34: an upload's cost is bounded. Over the limit is a 413 before the body is read (or
once the limit is read, for chunked and decompressed bodies); a near-limit body with a bad
record is a 400 within seconds whose answer is short; one request's peak memory is a small
multiple of its body, measured in a fresh process."""

import json
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from django.conf import settings

from benchsite.results.ingest import mixed
from benchsite.results.models import Upload
from tests.results.samples import META, record
from tests.results.upload_memory import body_of

URL = "/api/v3/results"
ROOT = Path(__file__).resolve().parents[2]


class Unread:
    """A WSGI input that fails the test if anything reads it."""

    def read(self, *args):
        raise AssertionError("the body was read")

    readline = read


@pytest.fixture
def token(make_token):
    return make_token("pytorch/ao")


def post(api, token, body, **extra):
    return api.generic("POST", URL, body, content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {token}", **extra)


def test_the_default_limit_bounds_one_request():
    assert settings.BENCH_UPLOAD_MAX_BYTES == 32 * 2**20
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE == 4 * 2**20


@pytest.mark.parametrize("authorized", [True, False])
def test_a_content_length_over_the_limit_is_413_before_the_body_is_read(api, token,
                                                                          authorized):
    limit = settings.BENCH_UPLOAD_MAX_BYTES
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if authorized else {}
    started = time.perf_counter()
    response = api.generic("POST", URL, b"", content_type="application/json",
                           CONTENT_LENGTH=str(limit + 1), **{"wsgi.input": Unread()}, **headers)
    assert time.perf_counter() - started < 5
    assert response.status_code == 413
    assert response.json()["limit_bytes"] == limit
    assert f"{limit} bytes" in response.json()["errors"][0]
    assert len(response.content) < 300


def test_a_gzip_bomb_is_413_once_the_limit_is_decompressed(api, token):
    compressor = zlib.compressobj(1, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    zeros = b"\0" * 2**20
    size = 2 * settings.BENCH_UPLOAD_MAX_BYTES
    bomb = b"".join([*(compressor.compress(zeros) for _ in range(size // len(zeros))),
                     compressor.flush()])
    assert len(bomb) < settings.BENCH_UPLOAD_MAX_BYTES / 50
    started = time.perf_counter()
    response = post(api, token, bomb, HTTP_CONTENT_ENCODING="gzip")
    assert time.perf_counter() - started < 5
    assert response.status_code == 413
    assert not Upload.objects.exists()


def test_a_near_limit_upload_with_one_bad_record_is_a_short_400_within_5_seconds(api, token):
    body = body_of(settings.BENCH_UPLOAD_MAX_BYTES - 2**20, bad=True)
    started = time.perf_counter()
    response = post(api, token, body)
    seconds = time.perf_counter() - started
    print(f"{len(body) / 2**20:.1f} MiB with one bad record: 400 in {seconds:.2f} s")
    assert response.status_code == 400
    assert seconds < 5
    assert len(response.content) < 1000
    errors = response.json()["errors"]
    assert errors[0].startswith("records[") and "benchmark_values[0]: expected a number" in (
        errors[0])
    assert not Upload.objects.exists()


def test_problems_are_listed_up_to_a_cap_and_values_are_not_echoed(api, token):
    long_text = "x" * 10_000
    bad = record(**META, metric={"name": "m", "benchmark_values": [long_text]})
    response = post(api, token, json.dumps([bad] * 1000).encode())
    assert response.status_code == 400
    body = response.json()
    assert body["error_count"] == 2000
    assert len(body["errors"]) == mixed.MAX_LISTED + 1
    assert body["errors"][-1] == "... and 1900 more problems (2000 in all)"
    assert len(response.content) < 100 * mixed.MAX_LISTED * 2
    assert "x" * 100 not in response.content.decode()


@pytest.mark.parametrize("case", ["gzip", "bad"])
def test_one_requests_peak_memory_is_a_small_multiple_of_its_body(case):
    """Peak RSS growth of the request's work (read, decompress, normalise, keep the payload)
    on a 16 MiB body of 55,000 records, each its own series (the worst case: records that
    share series cost less), in a fresh process."""
    mebibytes = 16
    run = subprocess.run(
        [sys.executable, "-m", "tests.results.upload_memory", str(mebibytes), case],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "benchsite.settings"}, check=True)
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    growth = figures["peak"] - figures["rss_before"]
    print(f"{case}: body {figures['body'] / 2**20:.1f} MiB (sent {figures['sent'] / 2**20:.2f} "
          f"MiB), peak RSS +{growth / 2**20:.0f} MiB ({growth / figures['body']:.1f}x) in "
          f"{figures['seconds']:.2f} s")
    assert (figures["problems"] is not None) == (case == "bad")
    assert growth <= 8 * figures["body"] + 32 * 2**20
