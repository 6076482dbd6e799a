"""Making one commit runnable, cached by sha under a disk budget.

A source's cache folder holds the mirror (`repo.git`), a worktree per commit
(`worktrees/SHA`) and a build per commit and recipe (`builds/SHA-RECIPE`):

- `pythonpath` mode: nothing to build; the run puts the checkout (or the recipe's folders
  inside it) first on PYTHONPATH, for pure-Python packages.
- `command` mode: a virtualenv per commit made with `--system-site-packages`, that also sees
  this interpreter's own site-packages (torch is shared, never reinstalled), in which the
  recipe's command runs with `{checkout}`, `{python}` and `{venv}` filled in, e.g.
  `pip install --no-deps --no-build-isolation -e {checkout}` (`pip` there installs into that
  virtualenv).

A build's outcome is kept in `build.json`, a failure with the tail of its log, so a broken
commit is not built again. After each build the least recently used commits are removed
until the cache is within its budget (never the commits a caller is using).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import site
import subprocess
import sys
import time
import venv
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import runner
from runner.sources.git import Repository

PYTHONPATH, COMMAND = "pythonpath", "command"
MODES = (PYTHONPATH, COMMAND)
PLACEHOLDERS = ("checkout", "python", "venv")
LOG_TAIL = 4000  # characters of a failed build's log kept
RUNNER_ROOT = str(Path(runner.__file__).resolve().parents[1])  # `python -m runner...` imports


class BuildFailed(RuntimeError):
    """The commit could not be built; `log_tail` is the end of the build's output."""

    def __init__(self, sha: str, reason: str, log_tail: str = ""):
        super().__init__(f"{sha[:12]}: {reason}")
        self.sha, self.reason, self.log_tail = sha, reason, log_tail


@dataclass(frozen=True)
class Recipe:
    """How a source builds one commit."""

    mode: str = PYTHONPATH
    command: str = ""  # COMMAND mode: a shell command template
    pythonpath: tuple[str, ...] = (".",)  # folders of the checkout first on PYTHONPATH
    env: Mapping[str, str] = field(default_factory=dict)  # extra environment, e.g. USE_CPP=0
    timeout_s: float = 1800

    def problems(self) -> list[str]:
        """What is wrong with this recipe, each naming its field."""
        found = []
        if self.mode not in MODES:
            found.append(f"mode: {self.mode!r} is not one of {', '.join(MODES)}")
        if self.mode == COMMAND and not self.command.strip():
            found.append("command: a build command is needed in command mode")
        try:
            self.command.format(**{name: "" for name in PLACEHOLDERS})
        except (KeyError, IndexError, ValueError) as error:
            found.append(f"command: {error!r} is not a placeholder; use "
                         f"{', '.join('{' + name + '}' for name in PLACEHOLDERS)}")
        for folder in self.pythonpath:
            if os.path.isabs(folder) or ".." in Path(folder).parts:
                found.append(f"pythonpath: {folder!r} must be a folder inside the checkout")
        for key, value in self.env.items():
            if not isinstance(key, str) or not key or "=" in key or not isinstance(value, str):
                found.append(f"env: {key!r}: names and values must be strings (no '=' in "
                             "a name)")
        if self.timeout_s <= 0:
            found.append(f"timeout_s: {self.timeout_s} must be above 0")
        return found

    @property
    def digest(self) -> str:
        text = json.dumps({**asdict(self), "env": dict(self.env)}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:10]


@dataclass(frozen=True)
class Built:
    """A runnable commit: the interpreter and environment its runs use."""

    sha: str
    checkout: Path
    python: str
    env: dict[str, str]


class Workspace:
    """A source's cache folder on this machine."""

    def __init__(self, location: str, recipe: Recipe, root: Path, budget_bytes: int):
        self.recipe = recipe
        self.root = root
        self.budget_bytes = budget_bytes
        self.repo = Repository(location, root / "repo.git")

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """One process at a time changes this cache (two workers of one machine)."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def build(self, sha: str, keep: frozenset[str] = frozenset()) -> Built:
        """The commit, checked out and built (or the cached build); BuildFailed when it does
        not build. `keep`: commits the budget must not remove."""
        with self.locked():
            self.repo.ensure()
            checkout = self.repo.worktree(sha, self.root / "worktrees" / sha)
            folder = self.root / "builds" / f"{sha}-{self.recipe.digest}"
            built = self._cached(sha, checkout, folder) or self._build(sha, checkout, folder)
            (folder / "build.json").touch()  # its last use, for the budget
            self.enforce_budget(keep | {sha})
        if isinstance(built, BuildFailed):
            raise built
        return built

    def _cached(self, sha: str, checkout: Path, folder: Path) -> Built | BuildFailed | None:
        try:
            state = json.loads((folder / "build.json").read_text())
        except (OSError, ValueError):
            return None
        if not state.get("ok"):
            return BuildFailed(sha, state.get("reason", "the build failed"),
                               state.get("log_tail", ""))
        return self._built(sha, checkout, folder)

    def _build(self, sha: str, checkout: Path, folder: Path) -> Built | BuildFailed:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        outcome: Built | BuildFailed = self._built(sha, checkout, folder)
        state: dict = {"ok": True, "seconds": 0.0}
        if self.recipe.mode == COMMAND:
            started = time.monotonic()
            outcome = self._run_command(sha, checkout, folder, outcome)
            state["seconds"] = round(time.monotonic() - started, 3)
        if isinstance(outcome, BuildFailed):
            state = {"ok": False, "reason": outcome.reason, "log_tail": outcome.log_tail}
        (folder / "build.json").write_text(json.dumps(state))
        return outcome

    def _built(self, sha: str, checkout: Path, folder: Path) -> Built:
        paths = [str(checkout / entry) for entry in self.recipe.pythonpath]
        paths += [RUNNER_ROOT, os.environ.get("PYTHONPATH", "")]
        env = {**self.recipe.env, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
        if self.recipe.mode == PYTHONPATH:
            return Built(sha, checkout, sys.executable, env)
        prefix = folder / "venv"
        env.update(VIRTUAL_ENV=str(prefix),
                   PATH=os.pathsep.join([str(prefix / "bin"), os.environ.get("PATH", "")]))
        return Built(sha, checkout, str(prefix / "bin" / "python"), env)

    def _run_command(self, sha: str, checkout: Path, folder: Path, built: Built
                     ) -> Built | BuildFailed:
        make_virtualenv(folder / "venv")
        command = self.recipe.command.format(
            checkout=shlex.quote(str(checkout)), python=shlex.quote(built.python),
            venv=shlex.quote(str(folder / "venv")))
        log = folder / "build.log"
        with open(log, "w") as output:
            output.write(f"$ {command}\n")
            output.flush()
            try:
                done = subprocess.run(command, shell=True, cwd=checkout, stdout=output,
                                      stderr=subprocess.STDOUT, timeout=self.recipe.timeout_s,
                                      env={**os.environ, **built.env}, start_new_session=True)
                failed = f"the build command exited with status {done.returncode}" \
                    if done.returncode else ""
            except subprocess.TimeoutExpired:
                failed = f"the build command timed out after {self.recipe.timeout_s:g} s"
        if failed:
            return BuildFailed(sha, failed, log.read_text(errors="replace")[-LOG_TAIL:])
        return built

    def enforce_budget(self, keep: set[str] | frozenset[str]) -> list[str]:
        """Remove the least recently used commits (worktree and builds) until the cache is
        within its budget; returns the shas removed."""
        entries: dict[str, list[Path]] = {}
        for path in (self.root / "worktrees").glob("*"):
            entries.setdefault(path.name, []).append(path)
        for path in (self.root / "builds").glob("*-*"):
            entries.setdefault(path.name.split("-")[0], []).append(path)
        sizes = {sha: sum(folder_size(p) for p in paths) for sha, paths in entries.items()}
        total = folder_size(self.root / "repo.git") + sum(sizes.values())
        removed = []
        for sha in sorted(entries, key=lambda sha: max(last_used(p) for p in entries[sha])):
            if total <= self.budget_bytes:
                break
            if sha in keep:
                continue
            for path in entries[sha]:
                if path.parent.name == "worktrees":
                    with contextlib.suppress(Exception):
                        self.repo.remove_worktree(path)
                shutil.rmtree(path, ignore_errors=True)
            total -= sizes[sha]
            removed.append(sha)
        return removed


def make_virtualenv(prefix: Path) -> None:
    """A virtualenv that sees the system's and this interpreter's site-packages (a worker's
    own virtualenv, with torch), and whose `pip` installs into it."""
    venv.EnvBuilder(system_site_packages=True, with_pip=False, symlinks=True).create(prefix)
    python = prefix / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    parents = [path for path in site.getsitepackages() if os.path.isdir(path)]
    Path(purelib, "_parent_site.pth").write_text(
        "import site; " + "; ".join(f"site.addsitedir({path!r})" for path in parents) + "\n")
    shim = prefix / "bin" / "pip"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(str(python))} -m pip "$@"\n')
    shim.chmod(0o755)


def folder_size(path: Path) -> int:
    if not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum(entry.stat().st_size for entry in path.rglob("*")
               if entry.is_file() and not entry.is_symlink())


def last_used(path: Path) -> float:
    stamp = path / "build.json"
    return (stamp if stamp.exists() else path).stat().st_mtime
