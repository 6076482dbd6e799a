"""Shared fixtures, and the rule that CI never skips into green.

With CI=true, the run stops at once unless Redis answers and the database is named: the real
PostgreSQL, which must answer, or an explicit SQLite file (scripts/test's second pass).
"""

from __future__ import annotations

import os
import socket

import pytest


def _reachable(url: str) -> bool:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    default_port = {"postgres": 5432, "postgresql": 5432, "redis": 6379}.get(parts.scheme, 0)
    try:
        with socket.create_connection((parts.hostname, parts.port or default_port), timeout=3):
            return True
    except OSError:
        return False


def pytest_sessionstart(session):
    if os.environ.get("CI") != "true":
        return
    database = os.environ.get("DATABASE_URL", "")
    broker = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    problems = []
    if database.startswith("sqlite:///"):
        pass
    elif not database.startswith(("postgres://", "postgresql://")):
        problems.append(f"DATABASE_URL={database!r}: CI must name PostgreSQL or a SQLite file")
    elif not _reachable(database):
        problems.append(f"PostgreSQL at {database} is unreachable")
    if not _reachable(broker):
        problems.append(f"Redis at {broker} is unreachable")
    if problems:
        pytest.exit("CI=true and a required service is missing: " + "; ".join(problems),
                    returncode=3)


@pytest.fixture
def make_token(db):
    from django.conf import settings

    from benchsite.results.models import UploadToken

    def make(*repos: str, name: str = "ci", scopes: list[str] | None = None,
             queues: list[str] | None = None) -> str:
        """A token for `repos`; by default one that may do everything (upload, submit jobs
        on every queue, read): tests of scopes name theirs."""
        token = UploadToken(name=name, repos=list(repos) or ["pytorch/ao"],
                            scopes=list(UploadToken.Scope.values) if scopes is None else scopes,
                            queues=list(settings.BENCH_QUEUES) if queues is None else queues)
        secret = token.issue()
        token.save()
        return secret

    return make


@pytest.fixture
def api(db):
    from rest_framework.test import APIClient

    return APIClient()


@pytest.fixture(autouse=True)
def _fresh_comparisons():
    """Comparisons are kept per process by run ids and result counts, which a test database
    rolled back may hand out again with other results."""
    from benchsite.comparison.compare import RECENT

    RECENT.clear()


@pytest.fixture(autouse=True)
def _fresh_series_ids():
    """Ingestion caches series ids when their transaction commits; a test that runs the
    commit callbacks (`django_capture_on_commit_callbacks(execute=True)`) inside the
    transaction the test then rolls back would leave ids of rows that never were."""
    from benchsite.results.ingest.store import CACHE_TOKENS, PRELOADED, SERIES_IDS

    yield
    SERIES_IDS.clear()
    CACHE_TOKENS.clear()
    PRELOADED.clear()


# Playwright driving Debian's Chromium (/usr/bin/chromium) against the live test server: one
# browser for the session, whichever test folder asks first.
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def browser():
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI") == "true":
            pytest.fail(f"{CHROMIUM} is missing: CI must run the browser tests")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    # Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
    # around it are still synchronous.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(base_url=live_server.url)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    offsite = []
    page.route("**/*", lambda route: (
        route.continue_() if route.request.url.startswith(live_server.url)
        else (offsite.append(route.request.url), route.abort())
    ))
    yield page
    context.close()
    assert not offsite, f"the page requested other hosts: {offsite}"
    assert not errors, f"browser errors: {errors}"
