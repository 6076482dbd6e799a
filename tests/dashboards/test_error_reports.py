"""Error pages never show a password: not Django's technical 500 page (DEBUG on), with the
settings, the request's headers and every frame's local variables, nor the site's own page.
A database that cannot be reached is the case the probe found (the password 18 times)."""

from __future__ import annotations

import sys

import dj_database_url
import pytest
from django.db import connections
from django.db.backends.postgresql.base import DatabaseWrapper
from django.test import Client, RequestFactory, override_settings
from django.urls import path
from django.views.debug import technical_500_response

from benchsite import urls
from benchsite.error_reports import mask_passwords

pytestmark = pytest.mark.django_db
PASSWORD = "s3cretpw"
DATABASE_URL = f"postgres://bench:{PASSWORD}@127.0.0.1:1/bench"  # nothing listens on port 1
BROKER_URL = f"redis://:{PASSWORD}@redis.example:6379/0"


def unreachable_database(request):
    """A query to a database that went away: psycopg's and Django's frames hold the
    connection's settings and its libpq connection string."""
    database_url = DATABASE_URL  # noqa: F841 (a local the page would show)
    settings_dict = connections.configure_settings({"default": dj_database_url.parse(database_url)})
    DatabaseWrapper(settings_dict["default"], alias="gone").cursor()


class Urls:
    urlpatterns = [path("gone/", unreachable_database), *urls.urlpatterns]
    handler500 = urls.handler500


SETTINGS = {"ROOT_URLCONF": Urls, "DATABASE_URL": DATABASE_URL,
            "CELERY_BROKER_URL": BROKER_URL, "EMAIL_HOST_PASSWORD": PASSWORD}


@pytest.mark.parametrize("debug", [True, False])
def test_no_password_on_the_500_page(debug):
    client = Client(raise_request_exception=False, HTTP_X_DATABASE=DATABASE_URL)
    with override_settings(DEBUG=debug, **SETTINGS):
        response = client.get("/gone/")
    assert response.status_code == 500
    body = response.content.decode()
    if debug:  # the technical page, with what it is there for
        assert "OperationalError" in body and "127.0.0.1:1/bench" in body
        assert "DATABASE_URL" in body and "redis.example" in body
    assert PASSWORD not in body


def test_no_password_in_the_technical_page_as_text_and_html():
    request = RequestFactory().get("/", HTTP_X_BROKER=BROKER_URL)
    try:
        unreachable_database(request)
    except Exception:
        exc_info = sys.exc_info()
    with override_settings(DEBUG=True, **SETTINGS):
        html = technical_500_response(request, *exc_info).content.decode()
        text = technical_500_response(RequestFactory().get(
            "/", HTTP_ACCEPT="text/plain", HTTP_X_BROKER=BROKER_URL), *exc_info)
    assert "OperationalError" in html
    assert PASSWORD not in html and PASSWORD not in text.content.decode()
    assert "redis://:********************@redis.example:6379/0" in html


@pytest.mark.parametrize(("text", "expected"), [
    ("postgres://u:pw@host/db", "postgres://u:***@host/db"),
    ("'redis://:p@ss@redis:6379/0', 'x'", "'redis://:***@redis:6379/0', 'x'"),
    ("amqp://guest:guest@rabbit", "amqp://guest:***@rabbit"),
    ("host=db password=pw dbname=x", "host=db password=*** dbname=x"),
    ("password='p w' user=u", "password=*** user=u"),
    ("https://example.com/a@b and user@example.com", "https://example.com/a@b and "
                                                     "user@example.com"),
])
def test_passwords_in_text_are_masked(text, expected):
    assert mask_passwords(text, "***") == expected
