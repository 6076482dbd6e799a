"""Rate limits per token and per anonymous address (429 with Retry-After), and the lockout
after repeated failed logins (django-axes)."""

import pytest
from django.contrib.auth.models import User
from django.core.cache import caches


@pytest.fixture(autouse=True)
def fresh_counters():
    caches["throttle"].clear()
    yield
    caches["throttle"].clear()


def get(api, secret=None, address="10.0.0.1"):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {secret}"} if secret else {}
    return api.get("/api/v3/runs", REMOTE_ADDR=address, **headers)


def test_the_defaults_leave_room_for_ci_bursts(settings):
    count, period = settings.BENCH_THROTTLE_TOKEN.split("/")
    assert int(count) >= 8000 and period == "hour"  # 8 parallel jobs x 1,000 uploads


def test_each_token_has_its_own_budget(api, make_token, settings):
    settings.BENCH_THROTTLE_TOKEN = "2/hour"
    one, two = make_token("pytorch/ao", name="one"), make_token("pytorch/ao", name="two")
    assert [get(api, one).status_code for _ in range(2)] == [200, 200]
    refused = get(api, one)
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 3600
    assert get(api, two).status_code == 200
    # a token is not an address: anonymous clients from there are counted apart
    assert get(api).status_code == 200


def test_anonymous_clients_are_counted_by_address(api, db, settings):
    settings.BENCH_THROTTLE_ANON = "2/minute"
    assert [get(api).status_code for _ in range(2)] == [200, 200]
    refused = get(api)
    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 60
    assert get(api, address="10.0.0.2").status_code == 200
    # a client cannot pick a new address for itself with X-Forwarded-For
    forged = api.get("/api/v3/runs", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="10.9.9.9")
    assert forged.status_code == 429


def test_an_empty_rate_turns_the_limit_off(api, db, settings):
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
