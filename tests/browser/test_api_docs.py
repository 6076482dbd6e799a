import pytest

pytestmark = pytest.mark.browser


def test_api_docs_render_from_our_own_static_files(page, db):
    page.goto("/api/docs/")
    paths = page.locator(".opblock-summary-path")
    paths.first.wait_for(timeout=15000)
    assert paths.filter(has_text="/api/v3/results").count() == 2  # GET and POST
    posts = page.locator(".opblock-post .opblock-summary-description")
    assert "Upload PyTorch OSS benchmark (v3) records" in posts.all_inner_texts()
    assert "Submit a benchmark job" in posts.all_inner_texts()
