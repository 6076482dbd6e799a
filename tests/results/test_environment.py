"""A run's environment fingerprint: what it keeps, what it leaves out, and a hash that does
not depend on how an upload wrote it."""

import json

from benchsite.results.environment import (
    describe,
    diff,
    environment_fields,
    environment_hash,
    fingerprint,
)
from benchsite.results.environment_changes import changes_between

RUNNERS = [{
    "name": "cuda", "type": "NVIDIA H100 80GB HBM3", "gpu_info": "NVIDIA H100 80GB HBM3",
    "gpu_count": 1, "cpu_info": "AMD EPYC 9654", "cpu_count": 16, "avail_mem_in_gb": 97.5,
    "extra_info": {"python": "3.11.9", "platform": "Linux-6.8.0-x86_64-with-glibc2.36",
                   "gpu_capability": "9.0", "image_digest": "sha256:abc123",
                   "machine_at_start": {"load_avg": [1.2, 0.8, 0.5], "cpu_governor": "performance",
                                        "gpu_driver": "570.86.15", "gpu_power_limit_w": 700.0,
                                        "gpu_temperature_c": 41.0, "gpu_sm_clock_mhz": 1980.0,
                                        "gpu_max_sm_clock_mhz": 1980.0}},
}]
DEPENDENCIES = {
    "torch": {"repo": "pytorch/pytorch", "version": "2.13.0.dev20261120",
              "sha": "0123456789abcdef0123", "extra_info": {"cuda": "12.8"}},
    "torchao": {"repo": "pytorch/ao", "version": "0.18.0"},
    "missing": {"repo": "x/y", "version": None},
}


def test_the_fingerprint_keeps_what_defines_the_environment_and_drops_what_varies():
    found = fingerprint(RUNNERS, DEPENDENCIES)
    assert found == {
        "torch": "2.13.0.dev20261120 (0123456789ab)", "cuda": "12.8", "torchao": "0.18.0",
        "gpu": "NVIDIA H100 80GB HBM3", "gpu_count": "1", "gpu_capability": "9.0",
        "cpu": "AMD EPYC 9654", "cpu_count": "16", "python": "3.11.9",
        "platform": "Linux-6.8.0-x86_64-with-glibc2.36", "image": "sha256:abc123",
        "driver": "570.86.15", "power_limit_w": "700", "max_sm_clock_mhz": "1980",
        "cpu_governor": "performance"}
    # loads, temperatures, current clocks and free memory are not an environment
    assert not any(value in ("41", "97.5") for value in found.values())


def test_the_same_environment_in_another_key_order_or_number_format_hashes_the_same():
    reordered_runners = [json.loads(json.dumps(RUNNERS[0], sort_keys=True))]
    reordered_runners[0]["extra_info"]["machine_at_start"]["gpu_power_limit_w"] = 700
    reordered_runners[0]["extra_info"]["machine_at_start"]["load_avg"] = [3.0, 2.0, 1.0]
    reordered = dict(reversed(list(DEPENDENCIES.items())))
    one = environment_fields(RUNNERS, DEPENDENCIES)
    other = environment_fields(reordered_runners, reordered)
    assert one == other and len(one["environment_hash"]) == 64
    bumped = {**DEPENDENCIES, "torch": {**DEPENDENCIES["torch"],
                                        "version": "2.13.0.dev20261121"}}
    assert environment_fields(RUNNERS, bumped)["environment_hash"] != one["environment_hash"]


def test_nothing_known_is_no_fingerprint_and_no_hash():
    assert fingerprint([], {}) == {} and environment_hash({}) == ""
    assert fingerprint("not a list", ["not", "a", "dict"]) == {}
    assert fingerprint([{"name": "cpu"}], {"torch": "2.13.0"}) == {"torch": "2.13.0"}


def test_a_diff_names_what_changed_and_says_the_notable_rest_is_unchanged():
    before = fingerprint(RUNNERS, DEPENDENCIES)
    after = {**before, "torch": "2.13.0.dev20261121 (fedcba987654)", "triton": "3.5.0"}
    changes = diff(before, after)
    assert [str(change) for change in changes] == [
        "torch 2.13.0.dev20261120 (0123456789ab) -> 2.13.0.dev20261121 (fedcba987654)",
        "triton 3.5.0 (new)"]
    assert describe(changes, before, after) == (
        "torch 2.13.0.dev20261120 (0123456789ab) -> 2.13.0.dev20261121 (fedcba987654); "
        "triton 3.5.0 (new); cuda, driver, gpu, image unchanged")
    assert describe([], before, before) == "no change"


def test_a_machine_state_that_could_not_be_read_once_is_not_a_change():
    before = fingerprint(RUNNERS, DEPENDENCIES)
    unread = {key: value for key, value in before.items() if key != "driver"}
    assert changes_between(before, unread) == []
    assert [c.key for c in changes_between(before, {**before, "driver": "575.51.03"})] == [
        "driver"]
    # a package that is gone is a change
    assert [str(c) for c in changes_between(before, {k: v for k, v in before.items()
                                                      if k != "torchao"})] == [
        "torchao 0.18.0 (gone)"]
