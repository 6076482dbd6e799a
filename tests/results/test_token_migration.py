"""Tokens made before scopes existed keep `upload` only."""

import pytest

from tests.migrating import migrate, migrate_to_latest

BEFORE = [("results", "0002_summaries")]
AFTER = [("results", "0003_series_baseline")]


@pytest.mark.django_db(transaction=True)
def test_existing_tokens_keep_upload_only():
    try:
        old = migrate(BEFORE).get_model("results", "UploadToken")
        old.objects.create(name="old ci", repos=["pytorch/ao"], prefix="bst_x", digest="d" * 64)
        token = migrate(AFTER).get_model("results", "UploadToken").objects.get(name="old ci")
        assert (token.scopes, token.queues) == (["upload"], [])
    finally:
        migrate_to_latest()
