"""Timestamps formatted by the database read as Python formats them."""

import orjson
import pytest

from benchsite.results.ingest import store_upload
from benchsite.results.models import Result
from dashboards.pages.common import IsoUtc
from tests.results import samples


@pytest.mark.django_db
def test_iso_utc_matches_isoformat():
    for when in (1_760_000_000, 1_700_000_001):  # whole seconds, as results are stored
        store_upload(orjson.dumps([samples.TORCHAO]),
                     metadata={**samples.META, "timestamp": when, "head_sha": str(when)})
    rows = Result.objects.values_list("timestamp", IsoUtc("timestamp"))
    assert len(rows) == 2
    assert all(stored.isoformat() == text for stored, text in rows)
