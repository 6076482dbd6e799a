"""What the site needs to know about the Celery broker beyond sending to it."""

from __future__ import annotations

import base64
import json
import time

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


def _client() -> redis.Redis | None:
    """The broker's Redis database; None for a broker that is not Redis."""
    if not settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        return None
    return redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=10,
                                socket_connect_timeout=10)


def stale_reservations(task: str, older_than: float) -> list[tuple[str, list]]:
    """(delivery tag, positional arguments) of `task`'s messages that a worker took from the
    broker more than `older_than` seconds ago and never acknowledged. kombu's Redis transport keeps
    them (hash `unacked`, zset `unacked_index`) until the visibility timeout, hours for
    cells; a live worker starts what it took at once, so a cell still pending whose message
    is among these was taken by a worker that died. Empty for a broker that is not Redis."""
    client = _client()
    if client is None:
        return []
    try:
        tags = client.zrangebyscore("unacked_index", 0, time.time() - older_than)
        if not tags:
            return []
        found = []
        for tag, raw in zip(tags, client.hmget("unacked", tags), strict=True):
            if raw is None:
                continue
            message = json.loads(raw)[0]
            if message.get("headers", {}).get("task") != task:
                continue
            body = message["body"]
            if message.get("properties", {}).get("body_encoding") == "base64":
                body = base64.b64decode(body)
            found.append((tag.decode(), json.loads(body)[0]))
        return found
    finally:
        client.close()


def forget_reservations(tags: list[str]) -> None:
    """Drop messages a lost worker took (their work was sent again), so that the broker does
    not deliver them once more at the visibility timeout."""
    client = _client()
    if client is None or not tags:
        return
    try:
        with client.pipeline() as pipe:
            pipe.hdel("unacked", *tags)
            pipe.zrem("unacked_index", *tags)
            pipe.execute()
    finally:
        client.close()


def broker_lost_data() -> bool:
    """Whether the broker's Redis database lost its data (a restart without persistence, a
    flush) since the last call: its marker key is gone. True on the first call ever too
    (queueing again is harmless: a cell runs once, whatever its messages). False for a
    broker that is not Redis, which keeps its queues by itself."""
    client = _client()
    if client is None:
        return False
    try:
        return bool(client.set(MARKER, timezone.now().isoformat(), nx=True))
    finally:
        client.close()


def consumers(queue: str, timeout: float = 2.0) -> list[str] | None:
    """The workers that consume `queue`, as answered within `timeout` s to a broadcast (any
    broker with fanout: Redis, the embedded filesystem one); None where tasks run in-process
    (the tests), so there is nothing to ask."""
    from benchsite.celery import app  # the app is the package's; imported where it is asked

    if app.conf.task_always_eager:
        return None
    answers = app.control.inspect(timeout=timeout).active_queues() or {}
    return sorted(worker for worker, queues in answers.items()
                  if any(q.get("name") == queue for q in queues))
