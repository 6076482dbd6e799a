"""API rate limits: one budget per token, one per anonymous client address (README:
Configuration). Logged-in users are not counted. Over the limit: 429 with Retry-After.

The rates are read from the settings at each request (so a test can change them) and kept
in the `throttle` cache: Redis when the site has a Redis broker, so every web process
counts together; otherwise each process counts alone.
"""

from __future__ import annotations

from django.conf import settings
from django.core.cache import caches
from rest_framework.throttling import SimpleRateThrottle

from benchsite.results.tokens import token_of


class _SettingsRateThrottle(SimpleRateThrottle):
    setting = ""

    def __init__(self):
        self.cache = caches["throttle"]
        super().__init__()

    def get_rate(self) -> str | None:
        return getattr(settings, self.setting) or None


class TokenRateThrottle(_SettingsRateThrottle):
    scope = "token"
    setting = "BENCH_THROTTLE_TOKEN"

    def get_cache_key(self, request, view) -> str | None:
        token = token_of(request)
        if token is None:
            return None
        return self.cache_format % {"scope": self.scope, "ident": token.pk}


class AnonRateThrottle(_SettingsRateThrottle):
    scope = "anon"
    setting = "BENCH_THROTTLE_ANON"

    def get_cache_key(self, request, view) -> str | None:
        if token_of(request) is not None or request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
