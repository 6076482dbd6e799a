"""Playwright driving Debian's Chromium (/usr/bin/chromium) against the live test server."""

import os

import pytest

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
