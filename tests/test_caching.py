"""`benchsite.caching.ProcessCache`: least recently used entries go first."""

from benchsite.caching import ProcessCache


def test_least_recently_used_goes_first():
    cache = ProcessCache(maxsize=2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # now "b" is the least recently used
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    cache.update({"a": 10, "d": 4})  # an update refreshes "a" and drops "c"
    assert (cache.get("a"), cache.get("c"), cache.get("d"), len(cache)) == (10, None, 4, 2)
    assert cache.get("missing", "default") == "default"


def test_expiring_entries():
    cache = ProcessCache(maxsize=2, ttl=600)
    cache.update({"a": 1, "b": 2, "c": 3})
    assert (cache.get("a"), cache.get("c"), len(cache)) == (None, 3, 2)
    assert cache.get_or_compute("d", lambda: 4) == 4
    cache.clear()
    assert len(cache) == 0
