"""The client's address, for the login lockout: as DRF's throttles find it (REMOTE_ADDR, or
the X-Forwarded-For entry BENCH_TRUSTED_PROXIES proxies back), so both count the same
client."""

from __future__ import annotations

from django.conf import settings


def client_address(request) -> str | None:
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    proxies = settings.BENCH_TRUSTED_PROXIES
    if proxies and forwarded:
        addresses = [address.strip() for address in forwarded.split(",")]
        return addresses[-min(proxies, len(addresses))]
    return request.META.get("REMOTE_ADDR")
