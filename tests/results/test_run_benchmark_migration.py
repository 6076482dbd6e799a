"""The runs' benchmarks of the summaries stored before `RunBenchmark` existed."""

from datetime import UTC, datetime

import pytest

from tests.migrating import migrate, migrate_to_latest

BEFORE = [("results", "0012_extra_info_orjson")]
AFTER = [("results", "0013_run_benchmark")]
GROUP = {"benchmark": "micro-benchmark api", "mode": "inference", "dtype": "int8wo",
         "backend": "", "suite": "torchao", "device": "cuda", "arch": "H100",
         "metric": "speedup", "compile_mode": "max-autotune"}


@pytest.mark.django_db(transaction=True)
def test_existing_summaries_give_each_run_its_benchmarks_commit_and_start():
    try:
        apps = migrate(BEFORE)
        Upload, Run = apps.get_model("results", "Upload"), apps.get_model("results", "Run")
        RunSummary = apps.get_model("results", "RunSummary")
        upload = Upload.objects.create(content_hash="h", payload_gzip=b"")
        totals = {"count": 1, "log_count": 1, "log_sum": 0.0, "string_count": 0,
                  "pass_count": 0}
        for day, branch, groups in ((1, "main", [{}, {"dtype": "int4wo"}, {"arch": "A100"}]),
                                    (2, "dev", [{"benchmark": "TorchInductor"}])):
            at = datetime(2026, 11, day, tzinfo=UTC)
            run = Run.objects.create(identity=f"{day}", repo="pytorch/ao", head_branch=branch,
                                     head_sha=f"{day}" * 40, timestamp=at, last_timestamp=at,
                                     upload=upload)
            for group in groups:
                RunSummary.objects.create(run=run, repo="pytorch/ao", branch=branch,
                                          timestamp=at, **{**GROUP, **group}, **totals)
        rows = migrate(AFTER).get_model("results", "RunBenchmark").objects
        assert set(rows.values_list("head_sha", "branch", "benchmark", "arch", "timestamp")) == {
            ("1" * 40, "main", "micro-benchmark api", "H100", datetime(2026, 11, 1, tzinfo=UTC)),
            ("1" * 40, "main", "micro-benchmark api", "A100", datetime(2026, 11, 1, tzinfo=UTC)),
            ("2" * 40, "dev", "TorchInductor", "H100", datetime(2026, 11, 2, tzinfo=UTC)),
        }
    finally:
        migrate_to_latest()
