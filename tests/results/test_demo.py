from django.core.management import call_command

from benchsite.results.models import Result, Run, Series, Upload


def test_load_demo_stores_through_ingestion_and_is_idempotent(db, capsys):
    call_command("load_demo", "--nights", "25")
    assert "loaded" in capsys.readouterr().out
    # 25 nights on H100 (torchao, inductor, vLLM jobs; fused kernels on the last 14), 22 on
    # A100 (outage on nights 20-22)
    assert Run.objects.filter(arch__startswith="NVIDIA H100").count() == 3 * 25 + 14
    assert Run.objects.filter(arch__startswith="NVIDIA A100").count() == 22
    assert set(Run.objects.values_list("repo", flat=True)) == {
        "pytorch/ao", "pytorch/pytorch", "vllm-project/vllm"}
    assert not Series.objects.filter(arch__startswith="NVIDIA A100",
                                     dtype__startswith="float8").exists()
    per_run = Result.objects.filter(run=Run.objects.first()).count()
    assert per_run == Run.objects.first().result_count > 0
    uploads = Upload.objects.count()
    call_command("load_demo", "--nights", "25")
    assert "already loaded" in capsys.readouterr().out
    assert Upload.objects.count() == uploads


def test_demo_injects_the_int8dq_regression(db):
    call_command("load_demo", "--nights", "70")
    speedups = list(
        Result.objects.filter(series__dtype="int8dq", series__metric="Fwd Speedup (x)",
                              series__arch__startswith="NVIDIA H100",
                              series__model="int8dq-4096-4096-8192")
        .order_by("timestamp").values_list("value", flat=True)
    )
    before, after = sum(speedups[50:60]) / 10, sum(speedups[60:70]) / 10
    assert 1.08 < before / after < 1.16
