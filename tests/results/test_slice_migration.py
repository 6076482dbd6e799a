"""The slices of the summaries stored before `SummarySlice` existed."""

from datetime import UTC, datetime

import pytest

from tests.migrating import migrate, migrate_to_latest

BEFORE = [("results", "0008_result_time_index_ascending")]
AFTER = [("results", "0009_summary_slice")]
GROUP = {"benchmark": "micro-benchmark api", "mode": "inference", "dtype": "int8wo",
         "backend": "", "suite": "torchao", "device": "cuda", "arch": "H100",
         "metric": "speedup", "compile_mode": "max-autotune"}


@pytest.mark.django_db(transaction=True)
def test_existing_summaries_get_their_slices_and_newest_times():
    try:
        apps = migrate(BEFORE)
        Upload, Run = apps.get_model("results", "Upload"), apps.get_model("results", "Run")
        RunSummary = apps.get_model("results", "RunSummary")
        upload = Upload.objects.create(content_hash="h", payload_gzip=b"")
        totals = {"count": 1, "log_count": 1, "log_sum": 0.0, "string_count": 0,
                  "pass_count": 0}
        for day, branch, dtype in ((1, "main", "int8wo"), (3, "main", "int8wo"),
                                   (2, "main", "int4wo"), (5, "dev", "int8wo")):
            at = datetime(2026, 11, day, tzinfo=UTC)
            run = Run.objects.create(identity=f"{day}", repo="pytorch/ao", head_branch=branch,
                                     head_sha=f"{day}" * 40, timestamp=at, upload=upload)
            RunSummary.objects.create(run=run, repo="pytorch/ao", branch=branch, timestamp=at,
                                      **{**GROUP, "dtype": dtype}, **totals)
        slices = migrate(AFTER).get_model("results", "SummarySlice").objects
        assert set(slices.values_list("branch", "dtype", "last_at")) == {
            ("main", "int8wo", datetime(2026, 11, 3, tzinfo=UTC)),
            ("main", "int4wo", datetime(2026, 11, 2, tzinfo=UTC)),
            ("dev", "int8wo", datetime(2026, 11, 5, tzinfo=UTC)),
        }
    finally:
        migrate_to_latest()
