"""Run settings checked against their dataclass, the same way for every family."""

import pytest

from runner import families
from runner.engine.run_settings import settings_problems, validate
from runner.engine.timing_data import TimingSettings


def test_valid_overrides_have_no_problems():
    assert settings_problems({}, TimingSettings) == []
    assert settings_problems({"samples": 5, "warmup_s": 0, "min_sample_s": 0.5,
                              "flush_l2": False}, TimingSettings) == []


def test_every_problem_is_named_with_its_value():
    found = settings_problems({"samples": 0, "threads": 1.5, "warmup_s": -1,
                               "min_sample_s": -0.5, "flush_l2": "yes", "speed": 1, "a": 2,
                               "builds": -1, "cell_budget_s": 0},
                              TimingSettings, "timing")
    assert found == [
        "timing: unknown settings ['a', 'speed']; known: ['samples', 'warmup_s', "
        "'min_sample_s', 'threads', 'gpu_method', 'min_gpu_block_s', 'flush_l2', "
        "'rotate_weights', 'ci_target', 'budget_s', 'min_pairs', 'max_pairs', 'builds', "
        "'resolution', 'cell_budget_s']",
        "timing.samples: must be an integer of at least 1, not 0",
        "timing.threads: must be an integer of at least 1, not 1.5",
        "timing.warmup_s: must be a number of seconds of at least 0, not -1",
        "timing.min_sample_s: must be a number of seconds of at least 0, not -0.5",
        "timing.flush_l2: must be true or false, not 'yes'",
        "timing.builds: must be an integer of at least 0, not -1",
        "timing.cell_budget_s: must be a number of seconds above 0, not 0",
    ]


def test_a_zero_sample_length_means_one_call_per_sample():
    assert settings_problems({"min_sample_s": 0}, TimingSettings) == []


def test_booleans_and_infinities_are_not_numbers():
    assert settings_problems({"samples": True, "warmup_s": float("inf")}, TimingSettings) == [
        "samples: must be an integer of at least 1, not True",
        "warmup_s: must be a number of seconds of at least 0, not inf",
    ]


def test_settings_must_be_a_mapping():
    assert settings_problems([1], TimingSettings, "timing") == [
        "timing: must be a mapping of settings"]


@pytest.mark.parametrize("name", list(families.FAMILIES))
def test_every_family_checks_job_settings_with_it(name):
    family = families.get(name)
    with pytest.raises(ValueError, match=r"unknown settings \['nope'\]"):
        family.check_settings({"nope": 1})
    with pytest.raises(ValueError, match="must be an integer of at least 1, not 0"):
        family.check_settings({"samples" if name != "instructions" else "repeats": 0})


def test_validate_raises_with_every_problem():
    with pytest.raises(ValueError, match="samples: .*; threads: "):
        validate({"samples": 0, "threads": 0}, TimingSettings)
