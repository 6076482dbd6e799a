"""runner.sources on the demo repository: worktrees and builds per sha, a failed build
recorded once with its log, the per-commit virtualenv that shares the worker's packages,
and the cache's disk budget."""

from __future__ import annotations

import subprocess
import sys

import pytest

from runner.sources import demo
from runner.sources.builds import COMMAND, BuildFailed, Recipe, Workspace
from runner.sources.git import GitError


def workspace(path, tmp_path, budget=10**9, **recipe):
    return Workspace(str(path), Recipe(**recipe), tmp_path / "cache", budget)


def test_a_commit_in_command_mode_builds_in_a_virtualenv_sharing_the_workers_packages(
        demo_repo, tmp_path):
    path, shas = demo_repo
    space = workspace(path, tmp_path, mode=COMMAND, command=demo.BUILD_COMMAND,
                      env={"USE_CPP": "0"})
    built = space.build(shas[0])
    assert built.checkout == tmp_path / "cache" / "worktrees" / shas[0]
    model = (built.checkout / "demopkg" / "model.py").read_text()
    assert model == demo._model(0, (1, demo.SLOWDOWN))
    assert built.env["USE_CPP"] == "0" and built.env["PYTHONPATH"].startswith(
        str(built.checkout))
    seen = subprocess.run(
        [built.python, "-c", "import sys, yaml, demopkg; print(sys.prefix)"],
        env=built.env, capture_output=True, text=True, check=True).stdout.strip()
    assert seen == str(tmp_path / "cache" / "builds" / f"{shas[0]}-{space.recipe.digest}" /
                       "venv")  # the commit's own virtualenv, seeing the worker's packages

    with pytest.raises(BuildFailed) as failed:
        space.build(shas[demo.BROKEN])
    assert "exited with status 1" in failed.value.reason
    assert "SyntaxError" in failed.value.log_tail
    marker = tmp_path / "cache" / "builds" / f"{shas[demo.BROKEN]}-{space.recipe.digest}"
    (marker / "build.log").unlink()  # a failed build is kept, not run again
    with pytest.raises(BuildFailed, match="exited with status 1"):
        space.build(shas[demo.BROKEN])


def test_refs_resolve_and_ranges_are_first_parent(demo_repo, tmp_path):
    path, shas = demo_repo
    repo = workspace(path, tmp_path).repo
    assert repo.resolve("main") == shas[-1] and repo.resolve(shas[3][:10]) == shas[3]
    assert repo.between(shas[2], shas[6]) == shas[3:7]
    with pytest.raises(GitError, match="not an ancestor"):
        repo.between(shas[6], shas[2])
    with pytest.raises(GitError, match="'nope' is no commit of this repository"):
        repo.resolve("nope")
    assert repo.commit(shas[demo.SLOW]).subject.startswith("model: compute")


def test_the_cache_keeps_to_its_budget_least_recently_used_first(demo_repo, tmp_path):
    path, shas = demo_repo
    space = workspace(path, tmp_path, budget=0)  # every commit but those kept goes
    space.build(shas[0])
    space.build(shas[1], keep=frozenset({shas[0]}))
    worktrees = tmp_path / "cache" / "worktrees"
    assert sorted(p.name for p in worktrees.iterdir()) == sorted([shas[0], shas[1]])
    space.build(shas[2])
    assert [p.name for p in worktrees.iterdir()] == [shas[2]]
    assert space.build(shas[0]).checkout.exists()  # made again when it is needed again


def test_a_recipe_names_its_problems():
    problems = Recipe(mode=COMMAND, command="make {target}", pythonpath=("../x",),
                      env={"A=B": "1"}).problems()
    assert any(p.startswith("command: KeyError('target')") for p in problems)
    assert "pythonpath: '../x' must be a folder inside the checkout" in problems
    assert any(p.startswith("env: 'A=B'") for p in problems)
    assert Recipe(mode=COMMAND).problems() == ["command: a build command is needed in "
                                               "command mode"]


PIP_BUILD = "pip install --no-deps --no-build-isolation --no-index -e {checkout}"


def tiny_package(path, versions: list[str]) -> list[str]:
    """A pure-Python package (setuptools, pyproject.toml) with a commit per version; the
    last version's pyproject.toml is broken. Its shas, oldest first."""
    path.mkdir()
    (path / "tinypkg").mkdir()
    (path / "tinypkg" / "__init__.py").write_text("def answer():\n    return 42\n")
    demo._git(path, "init", "--quiet", "--initial-branch=main")
    shas = []
    for number, version in enumerate(versions):
        (path / "pyproject.toml").write_text(
            '[build-system]\nrequires = ["setuptools>=64"]\n'
            'build-backend = "setuptools.build_meta"\n\n'
            f'[project]\nname = "tinypkg"\nversion = "{version}"\n'
            '\n[tool.setuptools]\npackages = ["tinypkg"]\n')
        demo._git(path, "add", "-A")
        demo._git(path, "commit", "--quiet", "-m", f"version {version}", date=number)
        shas.append(demo._git(path, "rev-parse", "HEAD"))
    return shas


def test_command_mode_pip_installs_each_commit_editable_into_its_own_virtualenv(tmp_path):
    """The README's build command on a package made here (no network: --no-index, and
    --no-build-isolation builds with the worker's setuptools): each commit is installed in
    its own virtualenv, importable there without PYTHONPATH, and nowhere else."""
    shas = tiny_package(tmp_path / "tiny", ["1.0", "2.0", "not a version"])
    space = workspace(tmp_path / "tiny", tmp_path, mode=COMMAND, command=PIP_BUILD,
                      pythonpath=())  # only the install makes it importable
    probe = ("import importlib.metadata as m, sys, tinypkg; "
             "print(m.version('tinypkg'), tinypkg.__file__, sys.prefix, tinypkg.answer())")
    seen = {}
    for sha in shas[:2]:
        built = space.build(sha)
        assert str(built.checkout) not in built.env["PYTHONPATH"].split(":")
        version, where, prefix, answer = subprocess.run(
            [built.python, "-c", probe], env=built.env, cwd=tmp_path, capture_output=True,
            text=True, check=True).stdout.split()
        seen[sha] = version
        assert where == str(built.checkout / "tinypkg" / "__init__.py")  # editable
        assert prefix == str(tmp_path / "cache" / "builds" / f"{sha}-{space.recipe.digest}" /
                             "venv") and answer == "42"
        log = (tmp_path / "cache" / "builds" / f"{sha}-{space.recipe.digest}" / "build.log")
        assert "Successfully installed tinypkg" in log.read_text()
    assert list(seen.values()) == ["1.0", "2.0"]
    worker = subprocess.run([sys.executable, "-c", "import tinypkg"], cwd=tmp_path,
                            capture_output=True, text=True)
    assert worker.returncode != 0  # the worker's own environment is untouched

    with pytest.raises(BuildFailed) as failed:
        space.build(shas[2])
    assert "exited with status 1" in failed.value.reason
    assert "not a version" in failed.value.log_tail  # pip's own words about the bad commit
