import json
import math

from django.core.management import call_command
from django.db.models import Max

from benchsite.results.ingest import delete_uploads, store_upload
from benchsite.results.ingest.summaries import SLICE, resummarize_runs
from benchsite.results.models import Run, RunBenchmark, RunSummary, SummarySlice
from tests.results.samples import INDUCTOR_ACCURACY, META, TORCHAO, record


def speedup(model, value):
    return record(TORCHAO, model={"name": model, "origins": ["torchao"]},
                  metric={"name": "Fwd Speedup (x)", "benchmark_values": [value]})


def accuracy(model, value):
    return record(INDUCTOR_ACCURACY, model={"name": model, "backend": "inductor"},
                  metric={"name": "accuracy", "extra_info": {"benchmark_values": [value]}})


def store(records):
    return store_upload(json.dumps(records).encode(), metadata=META).upload


def test_summaries_hold_geomean_parts_and_passrate(db):
    store([speedup("a", 2.0), speedup("b", 8.0), speedup("c", "inf")])
    store([accuracy("m1", "pass"), accuracy("m2", "fail_accuracy"),
           accuracy("m3", "pass_due_to_skip")])
    speed = RunSummary.objects.get(metric="Fwd Speedup (x)")
    assert (speed.count, speed.log_count, speed.dtype, speed.compile_mode) == (
        3, 2, "int8wo", "max-autotune")
    assert math.exp(speed.log_sum / speed.log_count) == 4.0
    acc = RunSummary.objects.get(metric="accuracy")
    assert (acc.count, acc.string_count, acc.pass_count, acc.backend) == (0, 3, 2, "inductor")
    assert speed.branch == "main" and speed.repo == "pytorch/ao"


def test_a_second_upload_to_the_same_run_adds_up(db):
    store([speedup("a", 2.0)])
    store([speedup("b", 8.0)])
    speed = RunSummary.objects.get()
    assert (speed.count, math.exp(speed.log_sum / speed.log_count)) == (2, 4.0)


def test_rederive_rebuilds_summaries(db):
    upload = store([speedup("a", 2.0), speedup("b", 8.0)])
    store([speedup("c", 4.0)])
    call_command("rederive_uploads", str(upload.pk))
    speed = RunSummary.objects.get()
    assert (speed.count, round(math.exp(speed.log_sum / speed.log_count), 9)) == (3, 4.0)


def test_ingestion_totals_match_a_rebuild_from_stored_results(db):
    store([speedup("a", 2.0), speedup("b", "inf"), accuracy("m1", "pass")])
    store([accuracy("m2", "fail_accuracy"), speedup("c", 0.0)])
    fields = ("run_id", "repo", "branch", "timestamp", "benchmark", "mode", "dtype", "backend",
              "suite", "device", "arch", "metric", "compile_mode", "count", "log_count",
              "string_count", "pass_count")
    incremental = sorted(RunSummary.objects.values_list(*fields, "log_sum"))
    resummarize_runs(list(RunSummary.objects.values_list("run_id", flat=True).distinct()))
    rebuilt = sorted(RunSummary.objects.values_list(*fields, "log_sum"))
    assert len(incremental) == 2
    assert [row[:-1] for row in incremental] == [row[:-1] for row in rebuilt]
    assert all(math.isclose(a[-1], b[-1]) for a, b in zip(incremental, rebuilt, strict=True))


def test_an_upload_of_more_groups_than_one_statement_holds_stores_them_all(db):
    """The summary rows, slices and benchmarks of an upload are written a few statements at
    a time (as many rows as the database's parameter limit allows: 55 on SQLite)."""
    records = [record(TORCHAO, benchmark={**TORCHAO["benchmark"], "dtype": f"recipe{n}",
                                          "name": f"bench{n % 3}"},
                      metric={"name": "Fwd Speedup (x)", "benchmark_values": [1.0 + n]})
               for n in range(130)]
    store(records)
    summaries = {(row.dtype, row.count, row.log_count) for row in RunSummary.objects.all()}
    assert summaries == {(f"recipe{n}", 1, 1) for n in range(130)}
    assert SummarySlice.objects.count() == 130
    assert set(RunBenchmark.objects.values_list("benchmark", flat=True)) == {
        "bench0", "bench1", "bench2"}
    before = set(RunSummary.objects.values_list("run_id", "dtype", "log_sum"))
    resummarize_runs([Run.objects.get().pk])
    assert set(RunSummary.objects.values_list("run_id", "dtype", "log_sum")) == before


def test_summaries_are_found_by_the_runs_exact_timestamp(db):
    """The trends and recipes pages filter summaries on run timestamps with the ORM: the rows
    ingestion writes with SQL must compare equal on every database (on SQLite they once were
    text in another format, and /recipes/ showed nothing)."""
    upload = store([speedup("a", 2.0)])
    run = Run.objects.get()
    assert RunSummary.objects.filter(timestamp=run.timestamp).count() == 1
    assert RunSummary.objects.filter(timestamp__gte=run.timestamp, run=run).exists()
    call_command("rederive_uploads", str(upload.pk))
    assert RunSummary.objects.filter(timestamp=run.timestamp).count() == 1


def slices():
    return {(s.repo, s.branch, s.dtype, s.metric, s.last_at.timestamp())
            for s in SummarySlice.objects.all()}


def test_slices_are_kept_with_the_summaries_and_their_newest_run(db):
    """Each repo, branch and slice once, with the newest run's time: an older run uploaded
    later does not move it back."""
    store([speedup("a", 2.0), accuracy("m1", "pass")])
    newer = {**META, "head_sha": "b" * 40, "timestamp": META["timestamp"] + 86400}
    store_upload(json.dumps([speedup("a", 3.0)]).encode(), metadata=newer)
    older = {**META, "head_sha": "c" * 40, "timestamp": META["timestamp"] - 86400}
    store_upload(json.dumps([speedup("b", 1.0)]).encode(), metadata=older)
    store_upload(json.dumps([speedup("a", 1.0)]).encode(),
                 metadata={**META, "head_branch": "dev", "head_sha": "d" * 40})
    assert slices() == {
        ("pytorch/ao", "main", "int8wo", "Fwd Speedup (x)", META["timestamp"] + 86400),
        ("pytorch/ao", "main", "amp", "accuracy", META["timestamp"]),
        ("pytorch/ao", "dev", "int8wo", "Fwd Speedup (x)", META["timestamp"]),
    }
    rebuilt = set(RunSummary.objects.values_list(*SLICE).annotate(Max("timestamp")))
    assert set(SummarySlice.objects.values_list(*SLICE, "last_at")) == rebuilt


def test_deleting_uploads_takes_their_slices_and_newest_times_back(db):
    first = store([speedup("a", 2.0), accuracy("m1", "pass")])
    newer = {**META, "head_sha": "b" * 40, "timestamp": META["timestamp"] + 86400}
    second = store_upload(json.dumps([speedup("a", 3.0)]).encode(), metadata=newer).upload
    dev = store_upload(json.dumps([speedup("a", 1.0)]).encode(),
                       metadata={**META, "head_branch": "dev", "head_sha": "d" * 40}).upload
    delete_uploads([second.pk, dev.pk])
    assert slices() == {
        ("pytorch/ao", "main", "int8wo", "Fwd Speedup (x)", META["timestamp"]),
        ("pytorch/ao", "main", "amp", "accuracy", META["timestamp"]),
    }
    delete_uploads([first.pk])
    assert not SummarySlice.objects.exists()


def run_benchmarks():
    return {(b.run.head_sha[0], b.branch, b.benchmark, b.arch, b.timestamp.timestamp())
            for b in RunBenchmark.objects.select_related("run")}


def test_run_benchmarks_are_kept_with_the_summaries_their_commit_and_start(db):
    """One row per run, benchmark and device, with the run's commit and start: moved earlier
    when a later upload continues the run from an earlier time, rebuilt by a rederive, gone
    with the uploads."""
    first = store([speedup("a", 2.0), accuracy("m1", "pass")])
    newer = {**META, "head_sha": "b" * 40, "timestamp": META["timestamp"] + 86400}
    store_upload(json.dumps([speedup("a", 3.0)]).encode(), metadata=newer)
    assert run_benchmarks() == {
        ("a", "main", TORCHAO["benchmark"]["name"], "NVIDIA H100 80GB HBM3", META["timestamp"]),
        ("a", "main", INDUCTOR_ACCURACY["benchmark"]["name"], "NVIDIA A100-SXM4-40GB",
         META["timestamp"]),
        ("b", "main", TORCHAO["benchmark"]["name"], "NVIDIA H100 80GB HBM3",
         META["timestamp"] + 86400),
    }
    earlier = {**newer, "timestamp": META["timestamp"] + 3600}  # the same run, started earlier
    store_upload(json.dumps([speedup("c", 1.0)]).encode(), metadata=earlier)
    assert ("b", "main", TORCHAO["benchmark"]["name"], "NVIDIA H100 80GB HBM3",
            META["timestamp"] + 3600) in run_benchmarks()
    assert Run.objects.count() == 2 and RunBenchmark.objects.count() == 3
    before = run_benchmarks()
    call_command("rederive_uploads", str(first.pk))
    assert run_benchmarks() == before
    delete_uploads([first.pk])
    assert {row[0] for row in run_benchmarks()} == {"b"}
