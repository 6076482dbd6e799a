"""The upload-token admin form takes repos as plain OWNER/NAME text and queues as checkboxes,
never JSON."""

import pytest
from django.contrib.auth.models import User

from benchsite.results.models import UploadToken

pytestmark = pytest.mark.django_db

ADD = "/admin/results/uploadtoken/add/"


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


def form(**changes):
    return {"name": "nightly", "repos": "pytorch/ao", "scopes": ["upload"], "is_active": "on",
            **changes}


def test_repos_one_a_line_or_comma_separated_and_queues_ticked(admin_client):
    page = admin_client.get(ADD).content.decode()
    assert 'type="checkbox" name="queues" value="cpu"' in page
    saved = admin_client.post(ADD, form(repos="pytorch/ao, pytorch/pytorch\r\nvllm-project/*",
                                        scopes=["upload", "submit_jobs"], queues=["cpu"]))
    assert saved.status_code == 302
    token = UploadToken.objects.get()
    assert (token.repos, token.queues) == (
        ["pytorch/ao", "pytorch/pytorch", "vllm-project/*"], ["cpu"])
    shown = admin_client.get(f"/admin/results/uploadtoken/{token.pk}/change/").content.decode()
    assert "pytorch/ao\npytorch/pytorch\nvllm-project/*</textarea>" in shown


@pytest.mark.parametrize(("repos", "expected"), [
    ('["pytorch/ao"]', "'[\"pytorch/ao\"]' is not a repo pattern: expected OWNER/NAME, OWNER/*"),
    ("pytorch", "'pytorch' is not a repo pattern: expected OWNER/NAME, OWNER/* or *"),
    ("", "This field is required."),
])
def test_json_or_a_bare_owner_is_refused_by_name(admin_client, repos, expected):
    page = admin_client.post(ADD, form(repos=repos))
    assert page.status_code == 200 and not UploadToken.objects.exists()
    assert any(expected in error for error in page.context["adminform"].form.errors["repos"])
