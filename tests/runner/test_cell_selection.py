"""`python -m runner run --cells REGEX` (runner.engine.selection): the cells whose key it
matches, `^KEY$` (one_cell) exactly one, a clear error for a bad pattern or none selected."""

import pytest
from conftest import FIXTURES

from runner import families
from runner.cli import main
from runner.engine.cells import Planned
from runner.engine.selection import one_cell, select
from runner.engine.specs import SpecError, read_spec


@pytest.mark.parametrize("name", ["cpu_small.yml", "kernels_cpu.yml", "compilers_cpu.yml"])
def test_one_cell_selects_that_cell_only(name):
    path = str(FIXTURES / name)
    _, planned = families.plan(read_spec(path), path)
    for cell in planned:
        assert select(planned, one_cell(cell.key), path) == [cell]


def test_one_cell_escapes_and_anchors_the_key():
    cells = [Planned(key, {}) for key in ("a.b", "axb", "a.b/c", "x/a.b", "a+b(1)")]
    for cell in cells:
        assert select(cells, one_cell(cell.key), "spec") == [cell]


def test_a_bad_pattern_or_one_selecting_none_is_an_error(capsys):
    path = str(FIXTURES / "cpu_small.yml")
    _, planned = families.plan(read_spec(path), path)
    with pytest.raises(SpecError, match=r"--cells: '\(' is not a regular expression"):
        select(planned, "(", path)
    with pytest.raises(SpecError, match="--cells: 'int9' selects none of the spec's 16 cells: "
                                        "cpu_small/linear/baseline"):
        select(planned, "int9", path)
    assert select(planned, "", path) == planned

    assert main(["run", path, "--dry-run", "--cells", "int9"]) == 2
    assert "selects none of the spec's 16 cells" in capsys.readouterr().err
    assert main(["run", path, "--dry-run", "--cells", "/int8wo/256-512-512/"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[-1] == "2 cells" and all("/int8wo/256-512-512/" in line for line in listed[:2])


def test_a_family_spec_runs_only_the_selected_cells(capsys):
    path = str(FIXTURES / "kernels_cpu.yml")
    assert main(["run", path, "--dry-run", "--cells", "(bad"]) == 2
    assert "is not a regular expression" in capsys.readouterr().err
    assert main(["run", path, "--dry-run", "--cells", "^cross_entropy/forward/"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert all(" cross_entropy/forward/" in line for line in listed[:-1])
    assert listed[-1] == f"{len(listed) - 1} cells"
