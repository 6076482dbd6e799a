"""The experiment matrix without running anything: expansion, filters, specs, settings."""

import logging

import pytest

from runner import families
from runner.cli import main as runner_main
from runner.compilers import models
from runner.compilers.family import check_settings, configuration
from runner.compilers.matrix import Config, expand, selected
from runner.compilers.spec import parse
from runner.engine.specs import SpecError, read_spec
from tests.runner.conftest import FIXTURES

SETTINGS = dict(device="cpu", batch_size=None, repeat=2, iterations_per_run=1, verify=False,
                dump_pytorch_profiles=False, timeout_s=60.0, output_dir="out")


def test_expansion_order_puts_eager_first_and_drops_duplicates():
    refs = [models.builtin("mlp"), models.builtin("lstm")]
    configs = expand(refs, ["aot_eager", "eager", "aot_eager"], ["eval", "train"],
                     ["float32"], [], [], **SETTINGS)
    assert [c.key for c in configs] == [
        "builtin/mlp/eager/eval/float32/cpu/bs8", "builtin/mlp/aot_eager/eval/float32/cpu/bs8",
        "builtin/mlp/eager/train/float32/cpu/bs8", "builtin/mlp/aot_eager/train/float32/cpu/bs8",
        "builtin/lstm/eager/eval/float32/cpu/bs4", "builtin/lstm/aot_eager/eval/float32/cpu/bs4",
        "builtin/lstm/eager/train/float32/cpu/bs4",
        "builtin/lstm/aot_eager/train/float32/cpu/bs4",
    ]
    assert Config.from_dict(configs[1].to_dict()) == configs[1]
    assert configs[1].baseline().key == configs[0].key


def test_filters_search_case_insensitively_and_exclude_wins():
    assert selected("transformer_encoder", [], [])
    assert selected("transformer_encoder", ["ENCODER", "nomatch"], [])
    assert not selected("transformer_encoder", ["^encoder"], [])
    assert not selected("resnet_blocks", ["res"], ["blocks$"])
    names = [c.model.name for c in parse({"models": "builtin", "filter": ["n"],
                                          "exclude": ["^r", "lstm"], "backends": ["eager"],
                                          "tests": ["eval"]}, "s")]
    assert names == ["cnn", "transformer_encoder"]


def test_spec_lists_every_problem():
    with pytest.raises(SpecError) as error:
        parse({"models": ["mlp", "nope", {"factory": "bad", "colour": 1}],
               "backends": ["eager", "tvm"], "tests": ["infer"], "dtypes": ["int8"],
               "device": "tpu", "repeat": 0, "timeout": -1, "verify": "yes", "filter": ["("],
               "extra": 1}, "spec.yml")
    problems = error.value.problems
    assert str(error.value).startswith("spec.yml: 12 problems:")
    for expected in ("extra: unknown key", "models[1]: 'nope' is not a suite",
                     "models[2].colour: unknown key", "models[2].factory: must be module.path",
                     "backends: 'tvm' is not one of", "tests: 'infer' is not one of",
                     "dtypes: 'int8' is not one of", "device: 'tpu' is not one of",
                     "repeat: must be a whole number", "timeout: must be a number",
                     "verify: must be true or false", "'(' is not a regular expression"):
        assert any(p.startswith(expected) or expected in p for p in problems), expected


def test_user_factories_and_their_verifier_options():
    [config] = parse({"models": [{"factory": "tests.runner.experiment_models:tiny",
                                  "name": "small", "tolerance": 0.1, "skip_verifier": True}],
                      "backends": ["eager"], "tests": ["eval"]}, "s")
    assert config.key == "custom/small/eager/eval/float32/cpu/bsdefault"
    assert config.model.tolerance == 0.1 and config.model.skip_verifier
    [plain] = models.resolve("tests.runner.experiment_models:tiny")
    assert (plain.suite, plain.name) == ("custom", "tiny")


def test_torchbench_is_absent_with_a_warning_when_not_installed():
    if models.torchbench_names() is not None:
        pytest.skip("torchbenchmark is installed here")
    seen = []
    handler = logging.Handler()
    handler.emit = seen.append
    logging.getLogger(models.__name__).addHandler(handler)
    try:
        assert models.resolve("torchbench") == []
    finally:
        logging.getLogger(models.__name__).removeHandler(handler)
    assert "torchbenchmark package is not installed" in seen[0].getMessage()
    assert parse({"models": ["torchbench", "mlp"], "backends": ["eager"], "tests": ["eval"]},
                 "s")[0].model.name == "mlp"


def test_fixture_spec_plans_through_the_families_interface():
    family, planned = families.plan(read_spec(FIXTURES / "compilers_cpu.yml"), "cpu spec")
    assert family.NAME == "compilers" and len(planned) == 8
    assert planned[0].key == "builtin/mlp/eager/eval/float32/cpu/bs8"
    assert configuration(planned[0].cell, {"samples": 7}).repeat == 7
    check_settings({"samples": 2})
    with pytest.raises(ValueError, match="unknown settings"):
        check_settings({"warmup": 1})
    with pytest.raises(ValueError, match="samples"):
        check_settings({"samples": 0})


def test_cli_dry_run_and_argument_errors(capsys):
    assert runner_main(["compilers", "--dry-run", "--device", "cpu", "--model", "mlp",
                        "--backend", "eager", "--backend", "inductor_max_autotune",
                        "--test", "eval", "--dtype", "bfloat16", "--batch-size", "3"]) == 0
    out = capsys.readouterr().out
    assert "builtin/mlp/inductor_max_autotune/eval/bfloat16/cpu/bs3" in out
    assert "2 configurations" in out
    assert runner_main(["compilers", "--device", "cpu", "--backend", "nope",
                        "--repeat", "0"]) == 2
    assert "2 problems" in capsys.readouterr().err
