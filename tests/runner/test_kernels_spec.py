"""Kernel specs: defaults, cell order and keys, every problem listed with its key path."""

import subprocess
import sys
import textwrap

import pytest
from conftest import FIXTURES

from runner import families
from runner.engine.specs import SpecError, read_spec
from runner.kernels import family
from runner.kernels.spec import KernelCell, parse


def test_defaults_and_order_eager_first():
    cells = parse({"shapes": ["64x128"], "kernels": ["softmax"],
                   "backends": ["compiled", "eager"]}, "s.yml")
    assert [cell.key for cell in cells] == [
        "softmax/forward/64x128/bfloat16/cuda/eager",
        "softmax/forward/64x128/bfloat16/cuda/compiled:max-autotune-no-cudagraphs",
        "softmax/backward/64x128/bfloat16/cuda/eager",
        "softmax/backward/64x128/bfloat16/cuda/compiled:max-autotune-no-cudagraphs",
    ]
    assert cells[0].atol is None and cells[0].timing == {}
    assert KernelCell.from_dict(cells[1].to_dict()) == cells[1]


def test_compile_modes_tolerance_and_timing_reach_the_cells():
    [eager, default, autotune] = parse({
        "kernels": "rms_norm", "directions": ["backward"], "shapes": [[8, 16]],
        "backends": ["eager", "compiled"], "compile_modes": ["default", "max-autotune"],
        "dtype": "torch.float32", "device": "cpu", "tolerance": 0.001,
        "timing": {"samples": 3, "warmup_s": 0}}, "s.yml")
    assert [eager.label, default.label, autotune.label] == [
        "eager", "compiled:default", "compiled:max-autotune"]
    assert (default.atol, default.rtol, default.dtype) == (0.001, 0.001, "float32")
    assert autotune.timing == {"samples": 3, "warmup_s": 0}


def test_every_problem_is_listed_with_its_key_path():
    with pytest.raises(SpecError) as caught:
        parse({"kernels": ["softmax", "gelu", "softmax"], "directions": "sideways",
               "backends": [], "compile_modes": ["fast"], "shapes": [[0, 4], "3y4", [2, 2],
                                                                     "2x2"],
               "dtype": "int8", "device": "tpu", "tolerance": {"atol": 0.1},
               "timing": {"samples": 0, "min_sample_s": -1, "flush": True}, "extra": 1},
              "bad.yml")
    error = caught.value
    assert error.source == "bad.yml"
    assert error.problems == [
        "extra: unknown key; expected one of kernels, directions, backends, compile_modes, "
        "shapes, dtype, device, tolerance, timing",
        "kernels[1]: 'gelu' is not one of cross_entropy, softmax, rms_norm, layer_norm",
        "kernels[2]: 'softmax' is listed twice",
        "directions[0]: 'sideways' is not one of forward, backward",
        "backends: must be a non-empty list drawn from eager, compiled, liger, quack",
        "compile_modes[0]: 'fast' is not one of default, reduce-overhead, max-autotune, "
        "max-autotune-no-cudagraphs",
        "compile_modes: given, but backends has no `compiled`",
        "shapes[0]: [0, 4]: M and N must be at least 1, M*N at most 17179869184",
        "shapes[1]: '3y4' is not [M, N] or \"MxN\" (positive integers)",
        "shapes[3]: 2x2 is listed twice",
        "dtype: 'int8' is not one of float32, bfloat16, float16",
        "device: 'tpu' is not one of cuda, cpu",
        "tolerance.rtol: required with the other: a number of at least 0",
        "timing: unknown settings ['flush']; known: ['samples', 'warmup_s', 'min_sample_s', "
        "'threads', 'gpu_method', 'min_gpu_block_s', 'flush_l2', 'rotate_weights', "
        "'ci_target', 'budget_s', "
        "'min_pairs', 'max_pairs', 'builds', 'resolution', 'cell_budget_s']",
        "timing.samples: must be an integer of at least 1, not 0",
        "timing.min_sample_s: must be a number of seconds of at least 0, not -1",
    ]


def test_shapes_are_required():
    with pytest.raises(SpecError, match=r"shapes: required"):
        parse({"kernels": ["softmax"]}, "s.yml")


def test_fixture_plans_through_the_families_interface_and_settings_are_checked():
    module, planned = families.plan(read_spec(FIXTURES / "kernels_cpu.yml"), "kernels_cpu.yml")
    assert module is family and family.NAME == "kernels"
    assert len(planned) == 4 * 2 * 2 * 4  # kernels x directions x shapes x backends
    assert planned[0].key == "cross_entropy/forward/256x512/float32/cpu/eager"
    family.check_settings({"samples": 5, "flush_l2": False})
    with pytest.raises(ValueError, match=r"unknown settings \['speed'\]; .*; "
                                         "samples: must be an integer of at least 1"):
        family.check_settings({"samples": 0, "speed": 1})


def test_planning_needs_no_torch():
    code = textwrap.dedent(f"""\
        import sys
        from runner import families
        from runner.engine.specs import read_spec
        families.plan(read_spec({str(FIXTURES / "kernels_cpu.yml")!r}), "k")
        assert "torch" not in sys.modules, "planning imported torch"
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
