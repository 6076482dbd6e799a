"""Commit labels cut a hex sha to 10 characters and keep anything else whole, such as an
ad-hoc job's `adhoc-job-ID`."""

from datetime import UTC, datetime

import pytest
from django.template import Context, Template

from benchsite.jobs.models import adhoc_sha
from dashboards.filters import commit_choices, short_sha


@pytest.mark.parametrize(("sha", "label"), [
    ("a" * 40, "a" * 10),
    ("0123456789ABCDEF0123", "0123456789"),
    ("abc1234", "abc1234"),
    (adhoc_sha(1234), "adhoc-job-1234"),
    ("main", "main"),
    ("", ""),
    (None, ""),
])
def test_short_sha_cuts_only_hex_shas(sha, label):
    assert short_sha(sha) == label


def test_commit_choices_keep_an_adhoc_label_whole():
    when = datetime(2026, 1, 2, tzinfo=UTC)
    assert commit_choices([(adhoc_sha(7), when), ("f" * 40, when)]) == [
        ("adhoc-job-7", "adhoc-job-7 · 2026-01-02"), ("f" * 40, "ffffffffff · 2026-01-02")]


def test_the_template_filter_is_the_same():
    template = Template("{% load dashboards %}{{ a|short_sha }} {{ b|short_sha }}")
    assert template.render(Context({"a": adhoc_sha(9), "b": "b" * 40})) == \
        "adhoc-job-9 bbbbbbbbbb"
