"""Production-safe defaults: DEBUG off unless asked for, a SECRET_KEY of the site's own when
none is set, HTTPS settings (redirect, secure cookies, HSTS) behind BENCH_HTTPS, and a
Content-Security-Policy on every response that lets only the site's scripts run."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = [*ROOT.glob("benchsite/**/templates/**/*.html"),
             *ROOT.glob("dashboards/templates/**/*.html")]
SHOWN = ["DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE",
         "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS", "SECURE_HSTS_INCLUDE_SUBDOMAINS",
         "SECURE_HSTS_PRELOAD", "SECURE_PROXY_SSL_HEADER"]


def settings_with(tmp_path: Path, **env: str) -> dict:
    """The settings a fresh process reads from this environment (nothing else set)."""
    unset = {"DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "BENCH_HTTPS", "BENCH_HSTS_SECONDS"}
    environ = {key: value for key, value in os.environ.items() if key not in unset}
    environ.update(BENCH_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="benchsite.settings",
                   **env)
    code = ("import json; from django.conf import settings as s; print(json.dumps("
            f"{{name: getattr(s, name, None) for name in {SHOWN!r}}}))")
    out = subprocess.run([sys.executable, "-c", code], env=environ, cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def test_nothing_set_is_production_safe_and_starts(tmp_path):
    first = settings_with(tmp_path)
    assert first["DEBUG"] is False
    assert first["ALLOWED_HOSTS"] == ["localhost", "127.0.0.1", "[::1]"]
    key = tmp_path / "secret_key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert first["SECRET_KEY"] == key.read_text().strip() and len(first["SECRET_KEY"]) >= 50
    assert settings_with(tmp_path)["SECRET_KEY"] == first["SECRET_KEY"]  # kept
    assert settings_with(tmp_path, SECRET_KEY="set")["SECRET_KEY"] == "set"
    assert settings_with(tmp_path, DEBUG="true")["DEBUG"] is True
    # plain HTTP (scripts/run, docker compose as shipped): cookies must work without TLS
    assert not first["SESSION_COOKIE_SECURE"] and not first["SECURE_SSL_REDIRECT"]
    assert not first["SECURE_HSTS_SECONDS"] and first["SECURE_PROXY_SSL_HEADER"] is None


def test_bench_https_turns_on_redirect_secure_cookies_and_hsts(tmp_path):
    https = settings_with(tmp_path, BENCH_HTTPS="true")
    assert https["SECURE_SSL_REDIRECT"] and https["SESSION_COOKIE_SECURE"]
    assert https["CSRF_COOKIE_SECURE"]
    assert https["SECURE_HSTS_SECONDS"] == 365 * 24 * 3600
    assert https["SECURE_HSTS_INCLUDE_SUBDOMAINS"] and https["SECURE_HSTS_PRELOAD"]
    assert https["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]


def test_the_deployment_check_is_clean_behind_https(tmp_path):
    environ = {key: value for key, value in os.environ.items()
               if key not in {"DEBUG", "SECRET_KEY", "ALLOWED_HOSTS"}}
    environ.update(BENCH_VAR_DIR=str(tmp_path), BENCH_HTTPS="true")
    check = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--tag",
                            "security", "--fail-level", "WARNING"],
                           env=environ, cwd=ROOT, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.django_db
@pytest.mark.parametrize(("url", "status"), [
    ("/", 200), ("/no-such-page/", 404), ("/runs/1/?repo=%00", 400), ("/api/v3/runs", 200),
    ("/api/docs/", 200), ("/static/benchsite/site.css", 200),
])
def test_every_response_has_a_content_security_policy(client, url, status):
    response = client.get(url)
    assert response.status_code == status
    policy = dict(part.strip().split(" ", 1)
                  for part in response["Content-Security-Policy"].split(";"))
    assert policy["default-src"] == "'self'" and policy["object-src"] == "'none'"
    assert policy["script-src"].split()[0] == "'self'"
    assert "unsafe-inline" not in policy["script-src"] and "unsafe-eval" not in policy[
        "script-src"]
    assert policy["frame-ancestors"] == "'none'"


def test_an_inline_script_carries_the_responses_nonce(admin_client):
    from benchsite.jobs.models import Job

    job = Job.objects.create(name="smoke", spec_yaml="{}", queue="cpu")
    response = admin_client.get(job.get_absolute_url())
    [nonce] = re.findall(r"'nonce-([^']+)'", response["Content-Security-Policy"])
    assert f'<script nonce="{nonce}">' in response.content.decode()


def test_the_api_docs_script_is_a_file_not_inline(client):
    html = client.get("/api/docs/").content.decode()
    assert re.findall(r"<script>", html) == []
    script = client.get("/api/docs/?script")
    assert script.status_code == 200 and "SwaggerUIBundle" in script.content.decode()


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda path: str(path.relative_to(ROOT)))
def test_templates_have_no_script_the_policy_would_block(template):
    """An inline script needs the nonce; an event handler attribute (onclick=...) or a
    javascript: URL cannot have one."""
    text = template.read_text()
    for tag in re.findall(r"<script\b[^>]*>", text):
        assert "src=" in tag or 'nonce="{{ CSP_NONCE }}"' in tag, tag
    assert not re.search(r"<[^>]+\son[a-z]+\s*=", text)
    assert "javascript:" not in text
