"""A series' latest points (comparison.history.recent): its branch's points only, newest
first up to the number wanted, the same whichever way PostgreSQL checks the branch."""

from datetime import UTC, datetime

import orjson
import pytest

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
