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

from cachetools import TTLCache


class _Generation(dict):
    """The young generation of a ProcessCache: a key found only in the old one is moved here
    on its first lookup. At `half` entries it becomes the old one (the old dropped)."""

    __slots__ = ("half", "older")

    def __init__(self, half: int):
        super().__init__()
        self.half = half
        self.older: dict = {}

    def __missing__(self, key: Hashable) -> Any:
        value = self.older.pop(key, MISSING)
        if value is not MISSING:
            self[key] = value
            self.turn_if_full()
        return value

    def turn_if_full(self) -> None:
        if len(self) >= self.half:
            self.older = dict(self)
            self.clear()


class ProcessCache:
    """At most `maxsize` entries, those used least recently dropped first; with `ttl`
    (seconds), entries also expire. Safe to use from the threads of one process.

    Without `ttl`, recency is kept by two generations of plain dicts: entries are put and
    found in the young one, which becomes the old one when it holds half of `maxsize`; an
    entry found in the old one moves back to the young. So an entry used since the last
    such turn stays, and a lookup is one dictionary lookup in C (`lookup`): ingestion looks
    a series up once a record, where an LRU list's reordering, and a Python method around
    it, cost a tenth of the fast path's time. (An update of more than half of `maxsize`
    entries at once is kept whole.)"""

    def __init__(self, maxsize: int, ttl: float | None = None):
        self._lock = threading.Lock()
        self._expiring = TTLCache(maxsize, ttl) if ttl else None
        self._young = _Generation(max(1, maxsize // 2))
        # The value of a key, else MISSING: without `ttl`, no Python call at all where the
        # key is young.
        self.lookup: Callable[[Hashable], Any] = (
            self._young.__getitem__ if self._expiring is None
            else lambda key: self.get(key, MISSING))

    def get(self, key: Hashable, default: Any = None) -> Any:
        if self._expiring is not None:
            with self._lock:
                return self._expiring.get(key, default)
        value = self.lookup(key)
        return default if value is MISSING else value

    def put(self, key: Hashable, value: Any) -> None:
        self.update({key: value})

    def update(self, items: dict) -> None:
        with self._lock:
            if self._expiring is not None:
                self._expiring.update(items)
                return
            young = self._young
            for key in items:
                young.older.pop(key, None)
            young.update(items)
            young.turn_if_full()

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The cached value, else `compute()` stored (computed outside the lock: two threads
        may both compute a missing value; the last one is kept)."""
        found = self.get(key, MISSING)
        if found is MISSING:
            found = compute()
            self.put(key, found)
        return found

    def clear(self) -> None:
        with self._lock:
            if self._expiring is not None:
                self._expiring.clear()
            self._young.clear()
            self._young.older = {}

    def __contains__(self, key: Hashable) -> bool:
        return self.get(key, MISSING) is not MISSING

    def __len__(self) -> int:
        if self._expiring is not None:
            return len(self._expiring)
        return len(self._young) + len(self._young.older)


MISSING = object()
