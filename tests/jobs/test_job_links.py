"""A job's page links to its family's dashboard."""

import pytest

from benchsite.jobs.models import Job


@pytest.mark.parametrize("family, expected", [
    ("quantization", "/quantization/?repo=pytorch%2Fao&branch=main&sha=abc"),
    ("kernels", "/kernels/?repo=pytorch%2Fao&branch=main&sha=abc"),
    ("compilers", "/compilers/?repo=pytorch%2Fao"),
    ("instructions", "/instructions/?repo=pytorch%2Fao"),
])
def test_dashboard_url_follows_the_family(family, expected):
    job = Job(family=family, repo="pytorch/ao", head_branch="main", head_sha="abc")
    assert job.dashboard_url() == expected
