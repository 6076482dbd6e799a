"""The one kind of process-global cache: bounded, thread-safe, optionally expiring.

Used where a value is worth keeping across requests of one worker process (series ids and
identities at ingestion, recent comparisons) and Django's cache framework would cost more
than it saves (it pickles: unpickling a whole-repo comparison took ~80 ms). Each cache is
per process; nothing here is shared between workers, so a stale entry must be either
harmless or checked by its user.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from cachetools import TTLCache


class ProcessCache:
    """At most `maxsize` entries, least recently used dropped first; with `ttl` (seconds),
    entries also expire. Safe to use from the threads of one process.

    Without `ttl` the entries live in an OrderedDict, whose lookups and reordering run in C:
    ingestion looks series up once per record, where cachetools' LRUCache (Python methods)
    cost a few microseconds each."""

    def __init__(self, maxsize: int, ttl: float | None = None):
        self._lru = not ttl  # else cachetools' TTLCache does it all
        self._items = OrderedDict() if self._lru else TTLCache(maxsize, ttl)
        self._maxsize = maxsize
        self._lock = threading.Lock()

    def get(self, key: Hashable, default: Any = None) -> Any:
        if not self._lru:
            with self._lock:
                return self._items.get(key, default)
        # Without the lock (ingestion looks up twice a record: the lock tripled the cost):
        # each OrderedDict call is atomic under the GIL, and an entry another thread drops
        # between the two is simply not moved.
        value = self._items.get(key, _MISSING)
        if value is _MISSING:
            return default
        try:  # noqa: SIM105 (contextlib.suppress would cost more than the lookup)
            self._items.move_to_end(key)
        except KeyError:
            pass
        return value

    def put(self, key: Hashable, value: Any) -> None:
        self.update({key: value})

    def update(self, items: dict) -> None:
        with self._lock:
            self._items.update(items)
            if self._lru:
                for key in items:
                    self._items.move_to_end(key)
                while len(self._items) > self._maxsize:
                    self._items.popitem(last=False)

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
