"""Running a benchmark at any commit of a project's git repository (bisection, A/B try jobs).

- `git`: a mirror of the repository in a cache folder and a worktree per commit.
- `builds`: how one commit is made runnable (its checkout first on PYTHONPATH, or a build
  command in a virtualenv of its own), cached by sha under a disk budget.
- `commit`: running planned cells of a spec at one commit, in a subprocess with that
  commit's environment (`runner.sources.child`), through runner.families.
- `demo`: a throwaway repository with a known slowdown, for tests, perf/ and the README.

Pure Python: the site (benchsite.bisects) decides what to measure and stores the records.
"""
