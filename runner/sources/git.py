"""A project's git repository on a worker: a mirror clone in a cache folder, commits resolved
and listed from it, and a detached worktree per commit."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

GIT_TIMEOUT_S = 600
# Never wait for a password or a host-key answer on a worker.
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_SSH_COMMAND": "ssh -o BatchMode=yes"}


class GitError(RuntimeError):
    """A git command failed; the message names the repository and what git said."""


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    author: str
    date: str  # ISO 8601, the committer's


class Repository:
    """The repository at `location` (a URL or a local path), mirrored into `mirror`."""

    def __init__(self, location: str, mirror: Path):
        self.location = location
        self.mirror = mirror

    def git(self, *args: str, cwd: Path | None = None) -> str:
        command = ["git", *args]
        try:
            done = subprocess.run(command, cwd=cwd or self.mirror, capture_output=True, text=True,
                                  timeout=GIT_TIMEOUT_S, env={**os.environ, **GIT_ENV})
        except (OSError, subprocess.TimeoutExpired) as error:
            raise GitError(f"{self.location}: git {' '.join(args)}: {error}") from None
        if done.returncode:
            said = (done.stderr or done.stdout).strip().splitlines()
            raise GitError(f"{self.location}: git {' '.join(args)}: "
                           f"{said[-1] if said else f'exit status {done.returncode}'}")
        return done.stdout

    def ensure(self) -> None:
        """Clone the mirror once."""
        if (self.mirror / "HEAD").exists():
            return
        self.mirror.parent.mkdir(parents=True, exist_ok=True)
        self.git("clone", "--mirror", "--quiet", self.location, str(self.mirror),
                 cwd=self.mirror.parent)

    def fetch(self) -> None:
        self.git("fetch", "--quiet", "--prune", "origin")

    def resolve(self, ref: str) -> str:
        """The full sha of a sha, branch or tag; fetches once when it is not known yet."""
        self.ensure()
        for attempt in range(2):
            try:
                return self.git("rev-parse", "--verify", "--quiet",
                                f"{ref}^{{commit}}").strip()
            except GitError:
                if attempt == 0:
                    self.fetch()
        raise GitError(f"{self.location}: {ref!r} is no commit of this repository")

    def between(self, good: str, bad: str) -> list[str]:
        """The first-parent commits after `good` up to `bad` (included), oldest first."""
        try:
            self.git("merge-base", "--is-ancestor", good, bad)
        except GitError:
            raise GitError(f"{self.location}: the good commit {good[:12]} is not an ancestor "
                           f"of the bad commit {bad[:12]}") from None
        return self.git("rev-list", "--reverse", "--first-parent", "--ancestry-path",
                        f"{good}..{bad}").split()

    def commit(self, sha: str) -> Commit:
        subject, author, date = self.git(
            "log", "-1", "--format=%s%x00%an <%ae>%x00%cI", sha).rstrip("\n").split("\0")
        return Commit(sha, subject, author, date)

    def worktree(self, sha: str, path: Path) -> Path:
        """A detached worktree of `sha` at `path` (kept when it is already there)."""
        if (path / ".git").exists():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.git("worktree", "prune")
        self.git("worktree", "add", "--detach", "--force", str(path), sha)
        return path

    def remove_worktree(self, path: Path) -> None:
        self.git("worktree", "remove", "--force", str(path))
