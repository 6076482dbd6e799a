"""API rate limits: one budget per token, one per anonymous client address (README:
Configuration). Logged-in users are not counted. Over the limit: 429 with Retry-After.

The rates are read from the settings at each request (so a test can change them) and kept
in the `throttle` cache: Redis when the site has a Redis broker, so every web process
counts together; otherwise each process counts alone (DRF's own throttle, in memory).

On Redis a budget is a sorted set of its requests' times, checked and added to by one Lua
script: one round trip a request, atomic across processes, and a cost that does not grow
with the requests counted. (DRF's cache throttle reads the whole list of times and writes
it back: two round trips, a pickled list of up to 10,000 times for a busy CI token, and a
request lost when two processes write at once.)
"""

from __future__ import annotations

import functools
import secrets

import redis
from django.conf import settings
from django.core.cache import caches
from rest_framework.throttling import SimpleRateThrottle

from benchsite.results.tokens import token_of

# KEYS[1]: the budget; ARGV: now, the period (seconds), the limit, a member for this request.
# Returns {1} when the request is counted, else {0, the seconds until the oldest one counted
# leaves the period}.
SLIDING_LOG = """
local now, period = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - period)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
    redis.call('ZADD', KEYS[1], now, ARGV[4])
    redis.call('EXPIRE', KEYS[1], math.ceil(period))
    return {1}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, tostring(tonumber(oldest[2]) + period - now)}
"""


@functools.cache
def _sliding_log(location: str):
    """The script, registered on a client of the Redis at `location` (one a process)."""
    return redis.Redis.from_url(location).register_script(SLIDING_LOG)


def _redis_location() -> str | None:
    throttle = settings.CACHES["throttle"]
    return throttle["LOCATION"] if throttle["BACKEND"].endswith(".RedisCache") else None


class _SettingsRateThrottle(SimpleRateThrottle):
    setting = ""
    # Not DRF's key: a budget DRF kept (a pickled list) in the same Redis, by a process of
    # an earlier release during a rolling deploy, is not read as a sorted set (WRONGTYPE).
    cache_format = "throttle_log_%(scope)s_%(ident)s"
    waited: float | None = None  # set where the Redis script refused the request

    def __init__(self):
        self.cache = caches["throttle"]
        super().__init__()

    def get_rate(self) -> str | None:
        return getattr(settings, self.setting) or None

    def allow_request(self, request, view) -> bool:
        location = _redis_location()
        if self.rate is None or location is None:
            return super().allow_request(request, view)
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        answer = _sliding_log(location)(
            keys=[self.cache.make_and_validate_key(self.key)],
            args=[self.timer(), self.duration, self.num_requests, secrets.token_hex(8)])
        if answer[0]:
            return True
        self.waited = float(answer[1])
        return False

    def wait(self) -> float | None:
        return self.waited if self.waited is not None else super().wait()


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
