"""The one kind of process-global cache: bounded, thread-safe, optionally expiring.

Used where a value is worth keeping across requests of one worker process (series ids and
identities at ingestion, recent comparisons) and Django's cache framework would cost more
than it saves (it pickles: unpickling a whole-repo comparison took ~80 ms). Each cache is
per process; nothing here is shared between workers, so a stale entry must be either
harmless or checked by its user.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

from cachetools import LRUCache, TTLCache


class ProcessCache:
    """At most `maxsize` entries, least recently used dropped first; with `ttl` (seconds),
    entries also expire. Safe to use from the threads of one process."""

    def __init__(self, maxsize: int, ttl: float | None = None):
        self._items = TTLCache(maxsize, ttl) if ttl else LRUCache(maxsize)
        self._lock = threading.Lock()

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            return self._items.get(key, default)

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._items[key] = value

    def update(self, items: dict) -> None:
        with self._lock:
            self._items.update(items)

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The cached value, else `compute()` stored (computed outside the lock: two threads
        may both compute a missing value; the last one is kept)."""
        found = self.get(key, _MISSING)
        if found is _MISSING:
            found = compute()
            self.put(key, found)
        return found

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


_MISSING = object()
