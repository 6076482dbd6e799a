"""A family's runner side is one module: its interface, its benchmark name and the directions
of its metrics; runner.families.register adds it, and the contract's directions with it."""

from types import ModuleType

import pytest

from runner import families
from runner.contract import directions
from runner.contract.directions import HIGHER, LOWER, direction
from runner.engine.cells import Outcome, Planned


def toy_family(name="toy", benchmark="toy benchmark", table=None):
    module = ModuleType(f"tests.runner.{name}")
    module.NAME = name
    module.BENCHMARK = benchmark
    module.DIRECTIONS = {"toy_score": HIGHER, "toy_time": LOWER} if table is None else table
    module.plan = lambda data, source: [Planned("one", {"n": 1})]
    module.check_settings = lambda settings: None
    module.run = lambda cell, settings, state, context, files: Outcome("ok")
    return module


@pytest.fixture
def toy():
    module = families.register(toy_family())
    yield module
    families.unregister(module.NAME)


def test_the_built_in_families_are_registered_with_their_directions():
    assert list(families.FAMILIES)[:4] == ["quantization", "kernels", "compilers",
                                           "instructions"]
    for module in families.FAMILIES.values():
        for metric, better in module.DIRECTIONS.items():
            found = direction(str(metric), module.BENCHMARK)
            assert found.better == better and found.rule.startswith("table: ")


def test_a_registered_family_plans_and_is_judged_by_its_table(toy):
    assert families.get("toy") is toy
    family, cells = families.plan({"family": "toy"}, "toy.yml")
    assert family is toy and cells == [Planned("one", {"n": 1})]
    assert direction("toy_score", "toy benchmark").rule == "table: toy benchmark / toy_score"
    assert direction("toy_time", "toy benchmark").better == LOWER


def test_registering_twice_is_harmless_and_unregistering_takes_the_table_back():
    module = toy_family()
    families.register(module)
    families.register(module)
    families.unregister("toy")
    assert "toy" not in families.FAMILIES
    assert ("toy benchmark", "toy_score") not in directions.TABLE
    assert direction("Fwd Speedup (x)", "micro-benchmark api").rule.startswith("table: ")


def test_a_module_that_is_no_family_or_contradicts_a_table_is_refused(toy):
    incomplete = ModuleType("incomplete")
    incomplete.NAME = "incomplete"
    with pytest.raises(TypeError, match="plan"):
        families.register(incomplete)
    with pytest.raises(ValueError, match="already"):
        families.register(toy_family())  # another module with the same NAME
    with pytest.raises(ValueError, match="already declared"):
        families.register(toy_family("other", "toy benchmark", {"toy_score": LOWER}))
    with pytest.raises(ValueError, match="neither"):
        families.register(toy_family("third", "third benchmark", {"x": "sideways"}))
    assert list(families.FAMILIES)[-1] == "toy"
