"""Rate limits per token and per anonymous address (429 with Retry-After), and the lockout
after repeated failed logins (django-axes)."""


import pytest
import redis
from django.contrib.auth.models import User
from django.core.cache import caches

from benchsite.results import throttles
from benchsite.results.models import UploadToken
from tests.jobs.conftest import SCRATCH, redis_reachable


def _in_redis(settings) -> None:
    redis_reachable(SCRATCH)
    settings.CACHES = {**settings.CACHES, "throttle": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": SCRATCH,
        "KEY_PREFIX": "throttle"}}


@pytest.fixture(params=["memory", "redis"])
def counters(request, settings):
    """The budgets where a site keeps them: in each process's memory (the embedded broker's
    site: DRF's throttle) or in the broker's Redis, counted by one script for every
    process."""
    if request.param == "redis":
        _in_redis(settings)
    caches["throttle"].clear()
    yield request.param
    caches["throttle"].clear()


def get(api, secret=None, address="10.0.0.1"):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {secret}"} if secret else {}
    return api.get("/api/v3/runs", REMOTE_ADDR=address, **headers)


def test_the_defaults_leave_room_for_ci_bursts(settings):
    count, period = settings.BENCH_THROTTLE_TOKEN.split("/")
    assert int(count) >= 8000 and period == "hour"  # 8 parallel jobs x 1,000 uploads


def test_each_token_has_its_own_budget(api, make_token, settings, counters):
    settings.BENCH_THROTTLE_TOKEN = "2/hour"
    one, two = make_token("pytorch/ao", name="one"), make_token("pytorch/ao", name="two")
    assert [get(api, one).status_code for _ in range(2)] == [200, 200]
    refused = get(api, one)
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 3600
    assert get(api, two).status_code == 200
    # a token is not an address: anonymous clients from there are counted apart
    assert get(api).status_code == 200


def test_anonymous_clients_are_counted_by_address(api, db, settings, counters):
    settings.BENCH_THROTTLE_ANON = "2/minute"
    assert [get(api).status_code for _ in range(2)] == [200, 200]
    refused = get(api)
    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 60
    assert get(api, address="10.0.0.2").status_code == 200
    # a client cannot pick a new address for itself with X-Forwarded-For
    forged = api.get("/api/v3/runs", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="10.9.9.9")
    assert forged.status_code == 429


def test_retry_after_is_when_the_oldest_counted_request_leaves_the_period(
        api, make_token, settings, monkeypatch, counters):
    settings.BENCH_THROTTLE_TOKEN = "2/minute"
    secret = make_token("pytorch/ao")
    for now, status in [(1000.0, 200), (1030.0, 200), (1045.0, 429)]:
        monkeypatch.setattr(throttles._SettingsRateThrottle, "timer",
                            staticmethod(lambda now=now: now))
        response = get(api, secret)
        assert response.status_code == status
    assert response["Retry-After"] == "15"  # the first request leaves the minute at 1060
    # a refused request is not counted: at 1061 the second is the only one left
    monkeypatch.setattr(throttles._SettingsRateThrottle, "timer", staticmethod(lambda: 1061.0))
    assert get(api, secret).status_code == 200


def test_a_budget_in_redis_is_one_for_every_process(api, make_token, settings, monkeypatch):
    """Two web processes (each with its own cache connections and registered script) count
    against one budget: a process reading the other's count never allows more."""
    _in_redis(settings)
    settings.BENCH_THROTTLE_TOKEN = "3/hour"
    secret = make_token("pytorch/ao")
    assert get(api, secret).status_code == 200
    throttles._sliding_log.cache_clear()  # as a second process would register it
    caches["throttle"].close()
    assert get(api, secret).status_code == 200
    # one round trip a request (the script, checked and counted at once), however many
    # requests the budget holds
    sent = []
    execute = redis.Redis.execute_command
    monkeypatch.setattr(redis.Redis, "execute_command",
                        lambda self, *args, **options: sent.append(args[0])
                        or execute(self, *args, **options))
    assert [get(api, secret).status_code for _ in range(2)] == [200, 429]
    assert sent == ["EVALSHA", "EVALSHA"]


def test_a_budget_an_earlier_release_kept_in_redis_is_not_misread(api, make_token, settings):
    """During a rolling deploy a process of the previous release (DRF's throttle: a pickled
    list under DRF's key) shares the Redis: its budget is not read as this one's."""
    _in_redis(settings)
    settings.BENCH_THROTTLE_TOKEN = "2/hour"
    secret = make_token("pytorch/ao")
    assert get(api, secret).status_code == 200
    token_id = UploadToken.objects.get().pk
    caches["throttle"].set(f"throttle_token_{token_id}", [1.0, 2.0], 3600)  # DRF's
    assert get(api, secret).status_code == 200


def test_an_empty_rate_turns_the_limit_off(api, db, settings, counters):
    settings.BENCH_THROTTLE_ANON = ""
    assert {get(api).status_code for _ in range(5)} == {200}


@pytest.mark.parametrize("url", ["/admin/login/", "/accounts/login/"])
def test_repeated_failed_logins_lock_the_user_out(client, db, settings, url):
    User.objects.create_user("maintainer", password="right-password", is_staff=True)
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        failed = client.post(url, {"username": "maintainer", "password": "wrong"})
        assert failed.status_code == 200  # the form again, with its error
    assert client.post(url, {"username": "maintainer", "password": "wrong"}).status_code == 429
    locked = client.post(url, {"username": "maintainer", "password": "right-password"})
    assert locked.status_code == 429 and "_auth_user_id" not in client.session
    # another address may still log in as that user
    other = client.post(url, {"username": "maintainer", "password": "right-password"},
                        REMOTE_ADDR="10.0.0.7")
    assert other.status_code == 302 and "_auth_user_id" in client.session
