"""`benchsite.caching.ProcessCache`: entries used least recently go first."""

from benchsite.caching import MISSING, ProcessCache


def test_entries_used_since_the_last_turn_stay():
    cache = ProcessCache(maxsize=4)  # two generations of two
    cache.update({"a": 1, "b": 2})  # full: they become the old generation
    assert cache.get("a") == 1  # young again; "b" is the least recently used
    cache.put("c", 3)  # "a" and "c" become the old generation, "b" goes
    assert (cache.get("b"), len(cache)) == (None, 2)
    assert (cache.get("a"), cache.get("c")) == (1, 3)
    cache.update({"a": 10, "d": 4})  # an update refreshes "a"
    assert (cache.get("a"), cache.get("d"), "a" in cache, "b" in cache) == (10, 4, True, False)
    assert cache.get("missing", "default") == "default"
    assert cache.lookup("missing") is MISSING and cache.lookup("d") == 4


def test_never_more_than_maxsize_entries_and_a_hot_one_stays():
    cache = ProcessCache(maxsize=10)
    cache.put("hot", 0)
    for number in range(100):
        cache.put(number, number)
        assert cache.get("hot") == 0  # used all along: never dropped
        assert len(cache) <= 10
    assert cache.get(99) == 99 and cache.get(0) is None


def test_expiring_entries():
    cache = ProcessCache(maxsize=2, ttl=600)
    cache.update({"a": 1, "b": 2, "c": 3})
    assert (cache.get("a"), cache.get("c"), len(cache)) == (None, 3, 2)
    assert cache.get_or_compute("d", lambda: 4) == 4
    assert cache.lookup("d") == 4 and cache.lookup("a") is MISSING
    cache.clear()
    assert len(cache) == 0
