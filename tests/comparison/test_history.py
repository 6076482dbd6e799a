"""A series' latest points (comparison.history.recent): its branch's points only, newest
first up to the number wanted, the same whichever way PostgreSQL checks the branch."""

import threading
from datetime import UTC, datetime

import orjson
import pytest
from django.db import connection, connections

from benchsite.comparison import history
from benchsite.results.ingest import store_upload
from benchsite.results.models import Series
from tests.results.samples import META, TORCHAO, record


def night(day: int, branch: str = "main") -> None:
    when = int(datetime(2027, 1 + day // 28, 1 + day % 28, 3, tzinfo=UTC).timestamp())
    body = orjson.dumps([
        record(**{**META, "timestamp": when, "head_sha": f"{day:040x}", "head_branch": branch},
               model={**TORCHAO["model"], "name": name},
               metric={**TORCHAO["metric"], "benchmark_values": [float(day)]})
        for name in ("a", "b", "c")])
    store_upload(body, announce=False)


@pytest.mark.parametrize("hashed_from", [1, 10**9])
def test_the_latest_points_of_the_branch_across_months(db, monkeypatch, hashed_from):
    monkeypatch.setattr(history, "HASHED_FROM", hashed_from)
    for day in (20, 30, 45, 70):
        night(day)
    night(50, branch="feature")  # newer than some, never a point of main
    ids = list(Series.objects.values_list("id", flat=True))
    found = history.recent(ids, 3, ["main"])
    assert sorted(found) == sorted(ids)
    for points in found.values():
        assert list(points.values) == [30.0, 45.0, 70.0]
    until = datetime(2027, 2, 28, tzinfo=UTC)
    assert [list(h.values) for h in history.recent(ids, 5, ["main"], until).values()] == [
        [20.0, 30.0, 45.0]] * 3


@pytest.mark.django_db(transaction=True)
def test_parts_are_read_ahead_on_postgresql_and_give_what_reading_each_gives(monkeypatch):
    for day in (3, 5, 8, 13):
        night(day)
    ids = sorted(Series.objects.values_list("id", flat=True))
    parts = [ids[:1], ids[1:2], ids[2:]]
    expected = [history.recent(part, 3, ["main"]) for part in parts]
    readers = []  # (thread, its connection) of each read
    read = history.recent

    def recent(*args):
        readers.append((threading.current_thread(), connections["default"]))
        return read(*args)

    monkeypatch.setattr(history, "recent", recent)
    found = list(history.recent_in_parts(parts, 3, ["main"]))
    assert [{pk: list(h.values) for pk, h in part.items()} for part in found] == [
        {pk: list(h.values) for pk, h in part.items()} for part in expected]
    assert [{pk: h.noise_floor for pk, h in part.items()} for part in found] == [
        {pk: h.noise_floor for pk, h in part.items()} for part in expected]
    threads = {thread for thread, _ in readers}
    if connection.vendor == "postgresql":  # reader threads, whose connections are closed
        assert 1 <= len(threads) <= history.READERS  # (a thread that is free takes the next)
        assert threading.current_thread() not in threads
        assert {wrapper.connection for _, wrapper in readers} == {None}
    else:
        assert threads == {threading.current_thread()}


def test_parts_are_read_here_inside_a_transaction(db, monkeypatch):
    """A second connection would not see what this transaction wrote."""
    night(3)
    ids = list(Series.objects.values_list("id", flat=True))
    threads = []
    read = history.recent
    monkeypatch.setattr(history, "recent", lambda *args: threads.append(
        threading.current_thread()) or read(*args))
    found = list(history.recent_in_parts([ids[:1], ids[1:]], 3, ["main"]))
    assert sorted(pk for part in found for pk in part) == sorted(ids)
    assert set(threads) == {threading.current_thread()}
