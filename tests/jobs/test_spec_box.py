"""The probes of issue 34 against the jobs API and the admin: a spec's files stay in the job's
folder, its recipes import nothing but allowed torchao classes, and what a submission costs is
bounded (400 or 413 within 5 s, never echoing the input)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from benchsite.catalog.validation import check_recipe
from benchsite.jobs.models import Job
from tests.jobs.conftest import FAST_TIMING
from tests.runner.test_spec_limits import ALIAS_BOMB, CALLABLES, nested

pytestmark = [pytest.mark.torch, pytest.mark.django_db(transaction=True)]

PROFILED = """\
quantization_config_recipe_names: ["int8wo"]
output_dir: "{output_dir}"
model_params:
  - name: "tiny"
    matrix_shapes: [{{name: custom, shapes: [[16, 32, 32]]}}]
    torch_compile_mode: false
    device: "cpu"
    enable_profiler: true
"""


def submit(api, token, spec: str):
    return api.post("/api/v3/jobs", {"spec": spec, "queue": "cpu", "timing": FAST_TIMING},
                    format="json", HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.fixture
def token(make_token):
    return make_token("pytorch/ao", scopes=["submit_jobs"], queues=["cpu"])


@pytest.mark.parametrize("output_dir", ["/tmp/probe-abs", "../../../../../tmp/probe-up"])
def test_an_output_dir_outside_the_job_folder_is_refused(api, token, output_dir):
    response = submit(api, token, PROFILED.format(output_dir=output_dir))
    assert response.status_code == 400
    assert "output_dir" in str(response.json())
    assert not Job.objects.exists() and not Path(output_dir).exists()


def test_a_profiled_job_writes_only_under_its_cell_folder(api, token, settings, tmp_path,
                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings.BENCH_FILES_DIR = str(tmp_path / "files")
    response = submit(api, token, PROFILED.format(output_dir="traces"))
    assert response.status_code == 201, response.json()
    job = Job.objects.get()
    assert job.status == "succeeded"
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert written and all(path.is_relative_to(job.cells.get().files) for path in written)
    assert job.cells.get().files == tmp_path / "files" / "jobs" / str(job.pk) / "0"
    assert any(path.suffix == ".json" for path in written)  # the profiler's trace


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
@pytest.mark.parametrize("callable_path", CALLABLES)
def test_a_recipe_that_names_a_callable_imports_nothing(api, token, callable_path, depth):
    sys.modules.pop("this", None)
    kwargs = nested(callable_path, depth)
    spec = ("quantization_config_recipe_names:\n"
            f"  - {{name: importer, config: torchao.quantization.Int8WeightOnlyConfig, "
            f"kwargs: {kwargs}}}\n"
            "model_params: {matrix_shapes: [{name: custom, shapes: [[16, 32, 32]]}], "
            "device: cpu}\n")
    response = submit(api, token, spec)
    assert response.status_code == 400
    assert "is not an allowed argument class" in str(response.json())
    assert "this" not in sys.modules and not Job.objects.exists()


@pytest.mark.parametrize("callable_path", CALLABLES)
def test_the_admin_refuses_such_a_recipe_before_building_it(callable_path, monkeypatch):
    from benchsite.catalog import validation

    monkeypatch.setattr(validation, "_build", lambda *a: pytest.fail("the config was built"))
    sys.modules.pop("this", None)
    check = check_recipe({"name": "importer", "config": callable_path, "kwargs": {}})
    assert "is not an allowed torchao config class" in check.errors["config"][0]
    check = check_recipe({"name": "importer",
                          "config": "torchao.quantization.Int8WeightOnlyConfig",
                          "kwargs": nested(callable_path, 2)})
    assert "is not an allowed argument class" in check.errors["kwargs"][0]
    assert "this" not in sys.modules


@pytest.mark.parametrize(("spec", "expected"), [
    (ALIAS_BOMB, "values once YAML aliases are expanded"),
    ("a: " + "x" * (2 * 1024 * 1024) + "\n", "bytes"),
    ("quantization_config_recipe_names: [int8wo]\nmodel_params: {matrix_shapes: "
     "[{name: custom, shapes: [" + ", ".join(f"[{m}, 8, 8]" for m in range(1, 10_002))
     + "]}], device: cpu}\n", "expands to 10,001 cells"),
])
def test_bombs_and_oversized_specs_are_refused_fast_without_echo(api, token, spec, expected):
    started = time.perf_counter()
    response = submit(api, token, spec)
    elapsed = time.perf_counter() - started
    assert response.status_code in (400, 413) and elapsed < 5, (response.status_code, elapsed)
    assert expected in response.content.decode() and len(response.content) < 10_000
    assert not Job.objects.exists()
