"""The short demo the dashboards' filter and default tests share, loaded once per module."""

import orjson
import pytest
from django.core.management import call_command
from django.db import transaction

from benchsite.results.ingest import store_upload
from tests.results.samples import TORCHAO, record

SMOKE_ARCH = "AMD EPYC 7R13 Processor"


def smoke_job() -> None:
    """What a CPU smoke job stores: two cells on `main`, newer than every nightly, on a
    device no nightly has (`scripts/run` did this before jobs without a commit went to
    the `adhoc` branch)."""
    cells = []
    for recipe in ("baseline", "int8wo"):
        cell = record(TORCHAO)
        cell["benchmark"] = {**cell["benchmark"], "dtype": recipe, "extra_info": {
            "device": "cpu", "arch": SMOKE_ARCH, "torch_compile_mode": "max-autotune"}}
        cell["model"] = {**cell["model"], "name": f"{recipe}-1024-1024-1024"}
        cells.append(cell)
    store_upload(orjson.dumps(cells), metadata={
        "repo": "pytorch/ao", "head_branch": "main", "head_sha": "job-1", "workflow_id": 0,
        "run_attempt": 1, "job_id": 1, "name": "cpu_small"}, announce=False)


@pytest.fixture(scope="module")
def short_demo(django_db_setup, django_db_blocker):
    """8 nights of the demo and a smoke job for the module's tests (each in its own
    savepoint), rolled back after them: what migrations seeded stays."""
    with django_db_blocker.unblock(), transaction.atomic():
        call_command("load_demo", "--nights", "8")
        smoke_job()
        yield
        transaction.set_rollback(True)
