"""Where a cell's files go: a folder that whoever runs the cell owns (the worker's per job and
cell, the CLI's current directory), and the paths a spec names, which stay inside it.

A spec is data from whoever may submit one: a path it names (`output_dir`) is a relative name
without `..`, checked when the spec is planned, and joined to the folder only when the cell
runs, where `inside` refuses anything that would still land outside (e.g. through a link).
A file is written with `write_atomically`, so an interrupted run never leaves a broken one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any


def path_problem(value: Any) -> str | None:
    """Why `value` is no relative path inside a cell's folder; None when it is one."""
    if not isinstance(value, str) or not value.strip():
        return "must be a non-empty relative path"
    if "\x00" in value or any(ord(char) < 32 for char in value):
        return "must not contain control characters"
    posix, windows = PurePosixPath(value), PureWindowsPath(value)
    if posix.is_absolute() or windows.is_absolute() or windows.drive or value.startswith("~"):
        return (f"{value[:100]!r}: must be relative (files go under the folder of the run, "
                "e.g. results/int8)")
    if ".." in posix.parts or ".." in windows.parts:
        return f"{value[:100]!r}: must not contain '..' (files stay under the folder of the run)"
    return None


def inside(folder: Path, relative: str) -> Path:
    """`relative` under `folder`, created; ValueError when it is no path a spec may name or
    it resolves outside `folder`."""
    problem = path_problem(relative)
    if problem:
        raise ValueError(f"output path {problem}")
    base = Path(os.path.realpath(folder))
    path = Path(os.path.realpath(base / relative))
    if path != base and base not in path.parents:
        raise ValueError(f"output path {relative!r} resolves to {path}, outside {base}")
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_atomically(path: Path, write: Callable[[Any], None], newline: str | None = None) -> None:
    """Write next to `path`, then rename: an interrupted write never leaves a broken file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    with partial.open("w", newline=newline) as handle:
        write(handle)
    os.replace(partial, path)
