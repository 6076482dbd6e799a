"""What the site needs to know about the Celery broker beyond sending to it."""

from __future__ import annotations

import kombu.exceptions
import redis
from django.conf import settings
from django.utils import timezone

# What sending a task raises when the broker cannot take it (down, restarting, unroutable).
BROKER_ERRORS = (kombu.exceptions.OperationalError, kombu.exceptions.InconsistencyError,
                 redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                 ConnectionError, TimeoutError)
# A key the sweeper keeps in the broker's Redis database: gone means the broker lost its data.
MARKER = "benchsite:broker-marker"


def broker_lost_data() -> bool:
    """Whether the broker's Redis database lost its data (a restart without persistence, a
    flush) since the last call: its marker key is gone. True on the first call ever too
    (queueing again is harmless: a cell runs once, whatever its messages). False for a
    broker that is not Redis, which keeps its queues by itself."""
    if not settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        return False
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=10,
                                  socket_connect_timeout=10)
    try:
        return bool(client.set(MARKER, timezone.now().isoformat(), nx=True))
    finally:
        client.close()
