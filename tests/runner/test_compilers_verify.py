"""Each verification code, from a crafted situation. Most run the child's work in this
process (child.run); the two codes the parent decides go through a real subprocess."""

import pytest

from runner.compilers import child, launch, models
from runner.compilers.matrix import Config
from runner.compilers.verify import Code

pytestmark = pytest.mark.torch
HELPERS = "tests.runner.experiment_models"


def config(tmp_path, model="tiny", backend="aot_eager", test="eval", verify=True,
           **overrides) -> Config:
    if isinstance(model, str):
        model = models.custom(f"{HELPERS}:{model}")
    values = dict(model=model, backend=backend, test=test,
                  dtype="float32", device="cpu", batch_size=None, repeat=2,
                  iterations_per_run=1, verify=verify, dump_pytorch_profiles=False,
                  timeout_s=60.0, output_dir=str(tmp_path), threads=1)
    values.update(overrides)
    return Config(**values)


@pytest.mark.parametrize("test", ["eval", "train"])
def test_pass(tmp_path, test):
    result = child.run(config(tmp_path, test=test))
    assert result["verification_code"] == Code.PASS
    assert "error" not in result["metrics"]


def test_fail_when_the_backend_gives_wrong_results(tmp_path):
    result = child.run(config(tmp_path, backend=f"{HELPERS}:wrong_backend"))
    assert result["verification_code"] == Code.FAIL
    assert len(result["metrics"]["per_iter_time"]) == 2  # it ran, its answers are wrong


def test_eager_failed_when_the_model_raises_in_eager(tmp_path):
    result = child.run(config(tmp_path, model="broken"))
    assert result["verification_code"] == Code.EAGER_FAILED
    assert "this model is broken in eager" in result["metrics"]["error"]


def test_exception_raised_when_the_backend_raises(tmp_path):
    result = child.run(config(tmp_path, backend=f"{HELPERS}:raising_backend"))
    assert result["verification_code"] == Code.EXCEPTION_RAISED
    assert "this backend cannot compile anything" in result["metrics"]["error"]


def test_nondeterministic_eager_run(tmp_path):
    result = child.run(config(tmp_path, model="drifting", backend="eager"))
    assert result["verification_code"] == Code.NONDETERMINISTIC_EAGER_RUN
    assert "error" not in result["metrics"]


def test_verifier_skipped_unless_asked_or_when_the_model_opts_out(tmp_path):
    assert child.run(config(tmp_path, backend="eager", verify=False))[
        "verification_code"] == Code.VERIFIER_SKIPPED
    opted_out = config(tmp_path, backend=f"{HELPERS}:wrong_backend",
                       model=models.custom(f"{HELPERS}:tiny", skip_verifier=True))
    assert child.run(opted_out)["verification_code"] == Code.VERIFIER_SKIPPED


def test_verifier_didnt_run_when_the_subprocess_crashes(tmp_path):
    line = launch.run(config(tmp_path, model="crashing", backend="eager"), "cpu model", 1)
    assert line["verification_code"] == Code.VERIFIER_DIDNT_RUN
    assert line["metrics"]["error"].startswith("the subprocess exited with status 3")


def test_timeout_kills_the_subprocess_and_is_recorded(tmp_path):
    line = launch.run(config(tmp_path, model="hanging", backend="eager", timeout_s=8.0),
                      "cpu model", 1)
    assert line["verification_code"] == Code.VERIFIER_DIDNT_RUN
    assert line["metrics"]["timed_out"] is True
    assert line["metrics"]["error"].startswith("timed out after 8 s")
