"""A throwaway git repository for trying bisection: a small package (`demopkg`) whose model
a compilers spec benchmarks on CPU, over 25 commits of which

- `BROKEN` (a refactor) leaves a syntax error in the package: it and the next commit do
  not build (`python -m compileall`) nor import; `BROKEN + 2` fixes it;
- `SLOW` makes the model recompute its hidden layer SLOWDOWN times: clearly slower.

    python -m runner.sources.demo /tmp/demo-repo     # prints the spec and the shas

`make(path)` (tests, perf/bisection.py) returns the shas, oldest first.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

COMMITS = 25  # commit 0 is the good end, the last one the bad end
BROKEN = 11
SLOW = 17
SLOWDOWN = 32  # ~30x slower: clear of a busy machine's noise (a 4x spread between runs)
# A "build" that fails on a syntax error, for a Source in command mode.
BUILD_COMMAND = "{python} -m compileall -q {checkout}/demopkg"
SPEC = """\
# The demo package's model on CPU, eager, one thread (python -m runner.sources.demo).
family: compilers
models:
  - {factory: "demopkg.model:make", name: demo_mlp}
backends: [eager]
tests: [eval]
dtypes: [float32]
device: cpu
repeat: 6
iterations_per_run: 10
threads: 1
timeout: 120
"""
METRIC = "abs_latency"

MODEL = '''\
"""A small MLP: the model the demo benchmark imports."""

import torch

WIDTH = 256
PASSES = {passes}  # times the hidden layer is computed


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(WIDTH, WIDTH)
        self.outer = torch.nn.Linear(WIDTH, 8)

    def forward(self, x):
        hidden = x
        for _ in range(PASSES):
            hidden = torch.relu(self.inner(hidden))
        return self.outer(hidden)


def make(batch_size=128):
    torch.manual_seed(0)
    return Model().eval(), (torch.randn(batch_size, WIDTH),)
'''


def _git(path: Path, *args: str, date: int = 0) -> str:
    stamp = f"{1_700_000_000 + 3600 * date} +0000"
    env = {**os.environ, "GIT_AUTHOR_NAME": "Demo Author", "GIT_AUTHOR_EMAIL": "demo@example.com",
           "GIT_COMMITTER_NAME": "Demo Author", "GIT_COMMITTER_EMAIL": "demo@example.com",
           "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    return subprocess.run(["git", *args], cwd=path, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def _model(number: int, passes: tuple[int, int]) -> str:
    text = MODEL.format(passes=passes[number >= SLOW])
    if BROKEN <= number < BROKEN + 2:  # a refactor that left a syntax error
        text = text.replace("def make(batch_size=128):", "def make(batch_size=128:")
    return text


def _subject(number: int, passes: tuple[int, int]) -> str:
    if number == 0:
        return "demopkg: a small MLP"
    if number == BROKEN:
        return "refactor: make()'s signature (breaks the build)"
    if number == BROKEN + 2:
        return "fix make()'s signature"
    if number == SLOW:
        return f"model: compute the hidden layer {passes[1]} times"
    return f"docs: note {number}"


def make(path: Path, commits: int = COMMITS, passes: tuple[int, int] = (1, SLOWDOWN)
         ) -> list[str]:
    """Create the repository at `path` (a new folder); its shas, oldest first. `passes`: how
    many times the model computes its hidden layer before SLOW and from it on (perf/
    bisection.py makes smaller steps: (4, 6) is about 1.5x)."""
    path.mkdir(parents=True)
    _git(path, "init", "--quiet", "--initial-branch=main")
    (path / "demopkg").mkdir()
    (path / "demopkg" / "__init__.py").write_text('"""The bisection demo package."""\n')
    shas = []
    for number in range(commits):
        (path / "demopkg" / "model.py").write_text(_model(number, passes))
        with open(path / "NOTES.md", "a") as notes:
            notes.write(f"- {_subject(number, passes)}\n")
        _git(path, "add", "-A")
        _git(path, "commit", "--quiet", "-m", _subject(number, passes), date=number)
        shas.append(_git(path, "rev-parse", "HEAD"))
    return shas


def main(argv: list[str]) -> int:
    if len(argv) != 1 or Path(argv[0]).exists():
        print("usage: python -m runner.sources.demo NEW_FOLDER", file=sys.stderr)
        return 2
    shas = make(Path(argv[0]))
    spec = Path(argv[0]).with_suffix(".yml")
    spec.write_text(SPEC)
    print(f"repository: {argv[0]}\nspec: {spec}\ngood: {shas[0]}\nbad: {shas[-1]}\n"
          f"broken: {shas[BROKEN]} {shas[BROKEN + 1]}\nslow (the culprit): {shas[SLOW]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
