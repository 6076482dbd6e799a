"""A user mints upload tokens only for the repos they may upload to themselves: a superuser
for any, others for those their repo scope's `upload_repos` cover."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.urls import reverse

from benchsite.access.models import RepoScope
from benchsite.results.models import UploadToken

pytestmark = pytest.mark.django_db

ADD = "/admin/results/uploadtoken/add/"


@pytest.fixture
def uploader():
    """A staff user in the uploaders group, as `bootstrap_roles` makes it."""
    call_command("bootstrap_roles", stdout=None)
    user = User.objects.create_user("uploader", password="pw", is_staff=True)
    user.groups.add(Group.objects.get(name="uploaders"))
    return user


def mint(client, user, repos: str, **changes):
    client.force_login(user)
    return client.post(ADD, {"name": "ci", "repos": repos, "scopes": ["upload"],
                             "is_active": "on", **changes})


def repo_errors(response) -> list[str]:
    return response.context["adminform"].form.errors.get("repos", [])


def test_the_probe_an_uploader_without_rights_mints_nothing_for_victim(client, uploader):
    refused = mint(client, uploader, "victim/*")
    assert refused.status_code == 200 and not UploadToken.objects.exists()
    assert any("you may not give a token victim/*" in error for error in repo_errors(refused))


@pytest.mark.parametrize(("held", "wanted", "allowed"), [
    (["pytorch/*"], "pytorch/ao", True),
    (["pytorch/*"], "pytorch/*", True),
    (["pytorch/*"], "pytorch/ao, pytorch/vision", True),
    (["pytorch/ao"], "pytorch/ao", True),
    (["pytorch/ao"], "pytorch/*", False),
    (["pytorch/*"], "victim/*", False),
    (["pytorch/*"], "victim/ao", False),
    (["pytorch/*"], "*", False),
    (["pytorch/*"], "pytorch/ao\nvictim/x", False),
    (["pytorch/*", "meta/*"], "meta/llama", True),
    (["*"], "victim/*", True),
    ([], "pytorch/ao", False),
])
def test_an_uploader_mints_only_what_their_upload_repos_cover(client, uploader, held, wanted,
                                                              allowed):
    RepoScope.objects.create(user=uploader, upload_repos=held)
    response = mint(client, uploader, wanted)
    assert (response.status_code == 302) is allowed, repo_errors(response)
    assert UploadToken.objects.exists() is allowed


def test_the_refusal_names_only_what_is_not_covered(client, uploader):
    RepoScope.objects.create(user=uploader, upload_repos=["pytorch/*"])
    refused = mint(client, uploader, "pytorch/ao, victim/x, *")
    assert repo_errors(refused) == [
        "you may not give a token victim/x, *: each repo must be covered by the repos you "
        "may mint upload tokens for (your repo scope, set by an admin)"]


def test_the_raw_upload_scope_grants_no_minting(client, uploader):
    RepoScope.objects.create(user=uploader, repos=["victim/*"])
    assert mint(client, uploader, "victim/*").status_code == 200


def test_a_superuser_mints_for_any_repo(client):
    root = User.objects.create_superuser("root", password="pw")
    assert mint(client, root, "victim/*\n*").status_code == 302
    assert UploadToken.objects.get().repos == ["victim/*", "*"]


def test_a_token_may_be_revoked_by_whoever_may_change_it(client):
    editor = User.objects.create_user("editor", password="pw", is_staff=True)
    editor.user_permissions.add(*Permission.objects.filter(
        codename__in=["change_uploadtoken", "view_uploadtoken"]))
    token = UploadToken(name="old", repos=["victim/*"])
    token.issue()
    token.save()
    client.force_login(editor)
    url = reverse("admin:results_uploadtoken_change", args=[token.pk])
    data = {"name": "old", "repos": "victim/*", "scopes": ["upload"]}
    assert client.post(url, {**data, "is_active": "on"}).status_code == 200  # not re-granted
    assert client.post(url, data).status_code == 302  # revoked
    token.refresh_from_db()
    assert not token.is_active


def test_the_repo_scope_admin_takes_upload_repos_one_a_line(client, uploader):
    client.force_login(User.objects.create_superuser("root", password="pw"))
    url = reverse("admin:access_reposcope_add")
    bad = client.post(url, {"user": uploader.pk, "repos": "", "upload_repos": "pytorch/a*"})
    assert bad.status_code == 200
    assert bad.context["adminform"].form.errors["upload_repos"][0].startswith(
        "'pytorch/a*' is not a repo pattern: expected OWNER/NAME, OWNER/* or *")
    good = client.post(url, {"user": uploader.pk, "repos": "pytorch/ao",
                             "upload_repos": "pytorch/*\r\nmeta/llama"})
    assert good.status_code == 302
    scope = RepoScope.objects.get()
    assert (scope.repos, scope.upload_repos) == (["pytorch/ao"], ["pytorch/*", "meta/llama"])


def test_bootstrap_roles_still_runs_twice(capsys):
    call_command("bootstrap_roles")
    call_command("bootstrap_roles")
    assert "updated group uploaders: 2 permissions" in capsys.readouterr().out
