"""A result's admin page shows its repetitions, which `values` stores as null for one."""

import orjson
import pytest
from django.contrib.auth.models import User

from benchsite.results.ingest import store_upload
from benchsite.results.models import Result
from tests.results.samples import META, record

pytestmark = pytest.mark.django_db


def test_a_results_page_shows_its_repetitions_read_only(client):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    store_upload(orjson.dumps([record(**META)]), announce=False)
    result = Result.objects.get()
    assert result.values is None and result.repetitions == [1.25]
    page = client.get(f"/admin/results/result/{result.pk}/change/").content.decode()
    assert 'name="values"' not in page
    assert "Repetitions" in page and "[1.25]" in page
