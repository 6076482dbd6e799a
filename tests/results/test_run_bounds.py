"""A run's results are read within its results' times (`Run.timestamp` to
`Run.last_timestamp`, kept at ingestion): the bounded reads find exactly the rows that
reading by run id alone finds, on either database (on PostgreSQL, over monthly partitions)."""

from datetime import UTC, datetime

import orjson
import pytest

from benchsite.results.ingest import delete_uploads, store_upload
from benchsite.results.models import Result, Run, run_spans
from tests.migrating import migrate, migrate_to_latest
from tests.results.samples import META, TORCHAO, record


def unix(year: int, month: int, day: int = 15, hour: int = 12) -> int:
    return int(datetime(year, month, day, hour, tzinfo=UTC).timestamp())


def upload(*times: int, sha: str = "a" * 40, name: str = "nightly"):
    """One record a time, each of its own series, all of one run (the run's identity
    leaves its time out)."""
    body = orjson.dumps([
        record(**{**META, "timestamp": when, "head_sha": sha, "name": name},
               model={**TORCHAO["model"], "name": f"m{when}"}) for when in times])
    return store_upload(body, announce=False).upload


def ids(results) -> list[int]:
    return sorted(results.values_list("id", flat=True))


def test_a_run_over_several_months_is_read_whole(db):
    times = [unix(2027, 1, 31, 23), unix(2027, 2, 1, 0), unix(2027, 3, 3)]
    upload(*times)
    run = Run.objects.get()
    assert (run.timestamp.timestamp(), run.last_timestamp.timestamp()) == (times[0], times[-1])
    assert len(ids(Result.objects.of_run(run))) == 3
    assert ids(Result.objects.of_run(run)) == ids(Result.objects.filter(run=run))


def test_a_run_continued_later_widens_its_bounds_both_ways(db):
    upload(unix(2027, 5, 10))
    upload(unix(2027, 4, 2), unix(2027, 7, 20))  # the same run, earlier and later
    run = Run.objects.get()
    assert (run.timestamp.timestamp(), run.last_timestamp.timestamp()) == (
        unix(2027, 4, 2), unix(2027, 7, 20))
    assert run.result_count == 3
    assert ids(Result.objects.of_run(run)) == ids(Result.objects.filter(run=run))


def test_deleting_an_upload_narrows_its_runs_bounds(db):
    upload(unix(2027, 5, 10))
    later = upload(unix(2027, 8, 1))
    delete_uploads([later.pk])
    run = Run.objects.get()
    assert run.last_timestamp.timestamp() == unix(2027, 5, 10)
    assert len(ids(Result.objects.of_run(run))) == 1


def test_commits_far_apart_and_a_commit_of_several_runs(db):
    upload(unix(2027, 1, 5), sha="b" * 40)
    upload(unix(2027, 1, 5, 13), sha="b" * 40, name="other job")
    upload(unix(2027, 11, 5), unix(2027, 12, 1), sha="c" * 40)
    upload(unix(2027, 6, 5), sha="d" * 40)  # between them: not read
    runs = Run.objects.filter(head_sha__in=["b" * 40, "c" * 40])
    spans = run_spans(runs)
    assert [len(span[0]) for span in spans] == [2, 1]  # one night's runs, then the other
    for shas in (["b" * 40], ["b" * 40, "c" * 40], ["e" * 40]):
        expected = Result.objects.filter(run__repo=META["repo"], run__head_sha__in=shas)
        assert ids(Result.objects.of_commits(META["repo"], shas)) == ids(expected)
    assert len(ids(Result.objects.of_commits(META["repo"], ["b" * 40, "c" * 40]))) == 4


@pytest.mark.django_db(transaction=True)
def test_the_migration_gives_existing_runs_their_bounds():
    try:
        apps = migrate([("results", "0009_summary_slice")])
        models = {name: apps.get_model("results", name) for name in ("Upload", "Run", "Series",
                                                                     "Result")}
        stored = models["Upload"].objects.create(content_hash="h", payload_gzip=b"")
        start = datetime(2025, 11, 1, tzinfo=UTC)
        used, empty = (models["Run"].objects.create(
            identity=identity, repo="pytorch/ao", head_branch="main", head_sha="s",
            timestamp=start, upload=stored) for identity in ("used", "empty"))
        series = models["Series"].objects.create(identity="s", repo="pytorch/ao",
                                                 benchmark="b", model="m", metric="x")
        for moment in (start, datetime(2026, 2, 3, tzinfo=UTC)):
            models["Result"].objects.create(series=series, run=used, upload=stored,
                                            timestamp=moment, values=[])
        migrate([("results", "0010_run_last_timestamp")])
        bounds = dict(Run.objects.values_list("identity", "last_timestamp"))
        assert bounds == {"used": datetime(2026, 2, 3, tzinfo=UTC), "empty": start}
    finally:
        migrate_to_latest()
