"""Repo names in GitHub's grammar, and the patterns that grant repos to tokens and users.

A repo is `OWNER/NAME`: the owner 1-39 letters, digits or hyphens, neither starting nor
ending with a hyphen (consecutive hyphens are allowed: GitHub forbids them only in new
names, and older accounts have them); the name 1-100 letters, digits, '.', '_' or '-', and
not '.' or '..'. Names are kept as written: GitHub ignores case, but a run's identity and
a grant's match do not.

A grant pattern is a repo, `OWNER/*` (every repo of an owner) or `*` (every repo); only
grants hold patterns. A grant matches a repo as `fnmatch` does (as grants always have), which
for these three forms is exactly the meaning above.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

OWNER = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?")
NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")
EXPECTED_REPO = ("expected OWNER/NAME as on GitHub (owner: 1-39 letters, digits or hyphens, "
                 "not starting or ending with one; name: 1-100 letters, digits, '.', '_' or "
                 "'-', not '.' or '..'), e.g. 'pytorch/ao'")
EXPECTED_PATTERN = "expected OWNER/NAME, OWNER/* or *, e.g. 'pytorch/ao' or 'pytorch/*'"
SHOWN = 100  # characters of a refused value shown in a message


class RepoNameError(ValueError):
    """A repo name or grant pattern out of the grammar; the message names where and why."""


def shown(value: Any) -> str:
    """`value` as a message shows it: its repr, cut to about SHOWN characters."""
    text = repr(value)
    return text if len(text) <= SHOWN else text[:SHOWN] + "…"


def is_repo(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    owner, slash, name = value.partition("/")
    return bool(slash and OWNER.fullmatch(owner) and NAME.fullmatch(name)
                and name not in (".", ".."))


def is_pattern(value: Any) -> bool:
    if value == "*" or is_repo(value):
        return True
    return (isinstance(value, str) and value.endswith("/*")
            and OWNER.fullmatch(value[:-2]) is not None)


def repo_problem(value: Any) -> str | None:
    """Why `value` is not a repo name (naming the value and what is expected), or None."""
    return None if is_repo(value) else f"{shown(value)} is not a repo: {EXPECTED_REPO}"


def pattern_problem(value: Any) -> str | None:
    """Why `value` is not a grant pattern, or None."""
    if is_pattern(value):
        return None
    return f"{shown(value)} is not a repo pattern: {EXPECTED_PATTERN}"


def check_repo(value: Any, where: str) -> str:
    """`value` when it is a repo name; RepoNameError naming `where` otherwise."""
    if problem := repo_problem(value):
        raise RepoNameError(f"{where}: {problem}")
    return value


def check_patterns(values: Any, where: str) -> list[str]:
    """`values` when it is a list of grant patterns; RepoNameError naming each bad one."""
    if not isinstance(values, list):
        raise RepoNameError(f"{where}: expected a list of repo patterns, got {shown(values)}")
    problems = [f"{where}: {problem}" for value in values if (problem := pattern_problem(value))]
    if problems:
        raise RepoNameError("; ".join(problems))
    return values


def grants(pattern: str, repo: str) -> bool:
    """Whether the grant `pattern` covers `repo`."""
    return fnmatch.fnmatchcase(repo, pattern)


def covers(held: str, wanted: str) -> bool:
    """Whether the grant `held` covers every repo the grant `wanted` does: `pytorch/*`
    covers `pytorch/ao` and `pytorch/*`, `pytorch/ao` does not cover `pytorch/*`."""
    if is_repo(wanted):
        return grants(held, wanted)
    return held in ("*", wanted)
