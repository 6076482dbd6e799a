"""Roles, the optional dashboard login, and upload tokens that never log anyone in."""

import io

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command

from benchsite.catalog.models import Recipe
from tests.catalog.conftest import user_in

pytestmark = pytest.mark.django_db
PAGES = ["/", "/quantization/", "/trends/", "/recipes/", "/jobs/", "/regressions/"]


def test_bootstrap_roles_is_idempotent_and_grants_exactly_each_role(roles):
    out = io.StringIO()
    call_command("bootstrap_roles", stdout=out)
    assert "updated group maintainers" in out.getvalue()
    assert Group.objects.count() == 3
    uploader, viewer, maintainer = (user_in(role, role) for role in
                                    ("uploaders", "viewers", "maintainers"))
    assert uploader.has_perm("results.add_uploadtoken")
    assert not uploader.has_perm("results.view_result")
    assert viewer.has_perm("results.view_result") and not viewer.has_perm(
        "catalog.change_recipe")
    assert all(maintainer.has_perm(p) for p in (
        "catalog.change_recipe", "catalog.add_benchmarkconfig", "jobs.add_job",
        "django_celery_beat.add_periodictask", "results.view_result"))
    assert not maintainer.has_perm("results.add_uploadtoken")


def test_a_viewer_cannot_change_a_recipe(client, roles, seeded):
    client.force_login(user_in("viewers", "viewer"))
    recipe = Recipe.objects.get(name="int8dq")
    change = f"/admin/catalog/recipe/{recipe.pk}/change/"
    assert client.post(change, {"enabled": ""}).status_code == 403
    assert client.post("/admin/catalog/recipe/", {
        "action": "disable", "_selected_action": [recipe.pk]}).status_code == 403
    recipe.refresh_from_db()
    assert recipe.enabled


def test_an_upload_token_cannot_log_in(client, make_token, settings):
    from benchsite.results.models import UploadToken

    secret = make_token("pytorch/ao", name="ci")
    token = UploadToken.objects.get()
    for username in ("ci", token.prefix, secret):
        for url in ("/accounts/login/", "/admin/login/"):
            client.post(url, {"username": username, "password": secret})
            assert "_auth_user_id" not in client.session
    settings.BENCH_LOGIN_REQUIRED = True
    page = client.get("/quantization/", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert page.status_code == 302 and page["Location"].startswith("/accounts/login/")
    admin = client.get("/admin/", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert admin.status_code == 302 and "/admin/login/" in admin["Location"]


def test_login_required_redirects_anonymous_users_and_lets_viewers_in(client, roles, settings):
    for url in PAGES:
        assert client.get(url).status_code == 200, url  # open by default
    settings.BENCH_LOGIN_REQUIRED = True
    for url in PAGES:
        answer = client.get(url + "?format=json")
        assert answer.status_code == 302, url
        assert answer["Location"] == f"/accounts/login/?next={url}%3Fformat%3Djson"
    assert client.get("/api/v3/results?repo=pytorch/ao").status_code == 401  # the API too
    assert client.get("/accounts/login/").status_code == 200
    user_in(None, "nobody")
    assert client.post("/accounts/login/", {"username": "nobody",
                                            "password": "a-long-password-1"}).status_code == 302
    refused = client.get("/quantization/")
    assert refused.status_code == 403 and b"viewers" in refused.content
    user_in("viewers", "viewer")
    client.post("/accounts/login/", {"username": "viewer", "password": "a-long-password-1"})
    for url in PAGES:
        assert client.get(url).status_code == 200, url
    assert client.get("/api/v3/results?repo=pytorch/ao").status_code == 200  # the session
    assert b"Log out viewer" in client.get("/").content
