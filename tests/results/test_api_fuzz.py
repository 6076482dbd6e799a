"""Schemathesis over the OpenAPI schema (`/api/schema/`): every operation with generated
valid and invalid parameters and bodies, sent with a token that may do everything, against
a database holding a few results. No answer may be a 5xx.

Bounded for CI (FUZZ_EXAMPLES per operation, derandomized: the same cases every run);
perf/api_fuzz.py is the long run.
"""

import json
import os

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from benchsite.results.ingest import store_upload
from benchsite.wsgi import application
from tests.results.samples import META, VLLM, record

FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)


@pytest.fixture
def served(db, make_token):
    """A token for every call, and results to list; the WSGI app keeps the test's database
    connection (Django closes it after each request otherwise, as its test client avoids)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    store_upload(json.dumps([
        record(**META),
        record(VLLM, **{**META, "head_sha": "b" * 40}, model={"name": "=HYPERLINK(1)"}),
    ]).encode())
    yield {"Authorization": f"Bearer {make_token('pytorch/ao', 'vllm-project/*')}"}
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.fuzz
@schema.parametrize()
@settings(max_examples=FUZZ_EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
def test_no_generated_request_gets_a_server_error(case, served):
    case.call_and_validate(headers=served, checks=[not_a_server_error])
