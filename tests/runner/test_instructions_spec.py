"""`family: instructions` specs: selection of built-in definitions, new ones, expansion over
modes, and every problem of a bad spec listed at once. No torch needed."""

import subprocess
import sys
import textwrap

import pytest
from conftest import FIXTURES

from runner import families
from runner.engine.specs import SpecError, read_spec
from runner.instructions import family
from runner.instructions.builtin import BUILTIN
from runner.instructions.definitions import Benchmark, Definition, Signature, expand
from runner.instructions.spec import parse_spec


def keys(spec):
    return [benchmark.key for benchmark in spec.benchmarks]


def test_the_built_in_set_expands_over_runtime_autograd_and_threads():
    spec = parse_spec({}, "spec.yml")
    assert len(BUILTIN) == 16 and len(spec.benchmarks) == 76  # 13 x 4 + 3 x 8 (threads 1, 4)
    assert keys(spec)[:4] == ["add [eager, forward, 1 thread]",
                              "add [eager, forward_backward, 1 thread]",
                              "add [torchscript, forward, 1 thread]",
                              "add [torchscript, forward_backward, 1 thread]"]
    assert "matmul [torchscript, forward_backward, 4 threads]" in keys(spec)
    skipped = {b.key: b.cannot_run() for b in spec.benchmarks if b.cannot_run()}
    assert skipped == {
        "empty [eager, forward_backward, 1 thread]":
            "forward+backward needs a signature naming the statement's output",
        "empty [torchscript, forward, 1 thread]":
            "TorchScript needs a signature naming the statement's inputs and output",
        "empty [torchscript, forward_backward, 1 thread]":
            "TorchScript needs a signature naming the statement's inputs and output",
    }


def test_a_spec_selects_built_ins_filters_and_defines_new_ones():
    spec = parse_spec({
        "builtin": ["index/*", "linear"],
        "definitions": [
            {"name": "neg", "setup": "x = torch.ones(4)", "stmt": "y = -x",
             "signature": "f(x) -> y", "timeout_s": 30, "number": 50},
            {"name": "norm", "setup": "x = torch.ones(4)", "signature": "f(x) -> y",
             "variants": {"l1": "y = x.norm(1)", "l2": "y = x.norm(2)"}},
            {"name": "relu", "setup": "x = torch.ones(4)", "model": "torch.nn.ReLU()",
             "signature": "f(x) -> y"},
        ],
        "filter": r"\[eager, forward,",
        "threads": [1, 2],
        "repeats": 2,
    }, "spec.yml")
    names = [b.definition.name for b in spec.benchmarks if b.threads == 1]
    assert names == ["index/int", "index/slice", "index/tensor", "linear", "neg", "norm/l1",
                     "norm/l2", "relu"]
    assert {b.threads for b in spec.benchmarks} == {1, 2}
    assert spec.settings.repeats == 2 and spec.settings.number == 1000
    neg = next(b for b in spec.benchmarks if b.definition.name == "neg")
    assert neg.timeout_s == 30 and neg.definition.number == 50
    assert neg.definition.kind == "statement"
    relu = next(b for b in spec.benchmarks if b.definition.name == "relu")
    assert relu.definition.kind == "model" and relu.program().forward == "y = model(x)"


def test_definitions_alone_leave_out_the_built_in_set():
    spec = parse_spec({"definitions": [{"name": "one", "stmt": "torch.ones(1)"}],
                       "runtime": "eager", "autograd": ["forward"]}, "spec.yml")
    assert keys(spec) == ["one [eager, forward, 1 thread]"]


def test_every_problem_is_listed_with_its_key_path():
    with pytest.raises(SpecError) as raised:
        parse_spec({
            "builtin": ["add", "nope*"],
            "definitions": [
                {"name": "a b", "stmt": "y = (", "model": "torch.nn.ReLU()"},
                {"name": "lin", "model": "torch.nn.Linear(2, 2)", "setup": 3, "extra": 1},
                {"name": "bad_sig", "stmt": "y = 1", "signature": "g(x) => y"},
                {"name": "v", "variants": {}, "threads": [0]},
            ],
            "runtime": ["eager", "jit"],
            "number": 0,
            "timeout_s": -1,
            "filter": "(",
            "colour": "blue",
        }, "spec.yml")
    error = raised.value
    assert str(error).startswith("spec.yml: 16 problems:")
    assert error.problems == [
        "colour: unknown key; known: autograd, builtin, definitions, filter, number, repeats, "
        "retries, runtime, threads, timeout_s, wall_time_s",
        "definitions[0].name: required, letters, digits, '_', '.' or '-', not 'a b'",
        "definitions[0]: needs exactly one of stmt, model or variants, not stmt and model",
        "definitions[0].signature: required with model, e.g. 'f(x) -> y'",
        "definitions[0].stmt: not valid Python: '(' was never closed (line 1)",
        "definitions[1].extra: unknown key; known: model, name, number, setup, signature, "
        "stmt, threads, timeout_s, variants",
        "definitions[1].setup: expected Python code as a string, not 3",
        "definitions[1].signature: required with model, e.g. 'f(x) -> y'",
        "definitions[2].signature: 'g(x) => y' is not of the form 'f(x, w) -> y'",
        "definitions[3].threads: expected thread counts of at least 1, not [0]",
        "definitions[3].variants: expected a mapping of variant name to stmt",
        "builtin[1]: 'nope*' matches no built-in definition; they are add, mul_scalar, "
        "matmul, cat, view, sum/all, sum/dim, index/int, index/slice, index/tensor, empty, "
        "tolist, linear, conv2d, layer_norm, mlp",
        "runtime: expected some of eager, torchscript, not ['eager', 'jit']",
        "filter: not a valid regular expression: missing ), unterminated subpattern at "
        "position 0",
        "number: must be an integer of at least 1, not 0",
        "timeout_s: must be a number of seconds above 0, not -1",
    ]


def test_names_must_be_unique_and_a_filter_must_select_something():
    with pytest.raises(SpecError, match="'add' is defined twice"):
        parse_spec({"builtin": ["add"], "definitions": [{"name": "add", "stmt": "1"}]}, "s")
    with pytest.raises(SpecError, match=r"filter: 'conv3d' selects no benchmark"):
        parse_spec({"filter": "conv3d"}, "s")
    with pytest.raises(SpecError, match=r"--filter: 'x\{' selects no benchmark"):
        parse_spec({}, "s", extra_filter="x{")


def test_signatures_and_cells_round_trip():
    assert str(Signature.parse(" f( a,b ) ->out ")) == "f(a, b) -> out"
    with pytest.raises(ValueError, match="'model' cannot be used"):
        Signature.parse("f(model) -> y")
    [benchmark] = expand([Definition("d", setup="x = 1", stmt="y = x",
                                     signature=Signature.parse("f(x) -> y"), threads=(2,))],
                         ("torchscript",), ("forward_backward",))
    assert Benchmark.from_dict(benchmark.to_dict()) == benchmark


def test_the_family_plans_the_fixture_and_checks_job_settings():
    module, planned = families.plan(read_spec(FIXTURES / "instructions_cpu.yml"), "fixture")
    assert module is family and module.NAME == "instructions"
    assert [p.key for p in planned] == ["add [eager, forward, 1 thread]",
                                        "matmul [eager, forward, 1 thread]",
                                        "sum [eager, forward, 1 thread]"]
    assert planned[0].cell["settings"]["repeats"] == 3
    family.check_settings({"repeats": 2, "timeout_s": 60})
    with pytest.raises(ValueError, match=r"unknown settings \['samples'\]"):
        family.check_settings({"samples": 3})
    with pytest.raises(ValueError, match="repeats: must be an integer of at least 1"):
        family.check_settings({"repeats": 0})


def test_list_needs_no_torch_and_refuses_other_families():
    code = textwrap.dedent(f"""\
        import sys
        from runner.cli import main
        assert main(["instructions", "--list", "--filter", "^mlp"]) == 0
        assert main(["instructions", "--spec", {str(FIXTURES / "cpu_small.yml")!r}]) == 2
        assert "torch" not in sys.modules, "listing imported torch"
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "8 benchmarks"
    assert "family: 'quantization'; this command runs `family: instructions` specs" in (
        done.stderr)
