"""Spec files of every family: reading them, and the one error type that lists their problems."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

DEFAULT_FAMILY = "quantization"  # of a spec without `family:`: torchao's configs run unchanged
# What one spec may cost before anything is planned: its text, its values once YAML aliases
# are expanded (an alias bomb is small text that stands for billions of values), how deep
# they nest, and the cells it expands to. A real spec is a few kB and a few hundred cells.
MAX_SPEC_BYTES = 1024 * 1024
MAX_SPEC_VALUES = 100_000
MAX_SPEC_DEPTH = 32
MAX_CELLS = 10_000
# An error never echoes a large input back: each problem is cut to SHOWN_CHARS, and at most
# SHOWN_PROBLEMS are listed.
SHOWN_CHARS = 1000
SHOWN_PROBLEMS = 50
# libyaml's parser when PyYAML has it (its wheels do): 6x faster on a large spec, and it
# refuses deep nesting at once where the pure-Python one takes seconds.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SpecError(ValueError):
    """A spec is unusable; the message names the file and every key path at fault."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source = _shorten(source)
        self.problems = [_shorten(problem) for problem in problems[:SHOWN_PROBLEMS]]
        if len(problems) > SHOWN_PROBLEMS:
            self.problems.append(f"and {len(problems) - SHOWN_PROBLEMS} more problems")
        if len(self.problems) == 1:
            message = f"{source}: {self.problems[0]}"
        else:
            listed = "\n".join(f"  {p}" for p in self.problems)
            message = f"{source}: {len(problems)} problems:\n{listed}"
        super().__init__(message)


def _shorten(problem: str) -> str:
    if len(problem) <= SHOWN_CHARS:
        return problem
    return f"{problem[:SHOWN_CHARS]}... ({len(problem) - SHOWN_CHARS} more characters)"


def family_name(data: Any) -> str:
    """The family a parsed spec names with its `family:` key (runner.families)."""
    if isinstance(data, Mapping):
        return data.get("family", DEFAULT_FAMILY)
    return DEFAULT_FAMILY


def read_spec(path: str | Path) -> Mapping:
    """The parsed YAML mapping of the file at `path`; SpecError when it cannot be read or
    parsed, or is not a mapping."""
    source = str(path)
    try:
        size = Path(path).stat().st_size
        if size > MAX_SPEC_BYTES:
            raise SpecError(source, [_too_large(size)])
        text = Path(path).read_text()
    except OSError as error:
        raise SpecError(source, [f"cannot read: {error.strerror or error}"]) from None
    return parse_yaml(text, source)


def parse_yaml(text: str, source: str) -> Mapping:
    """The spec's mapping; SpecError when the text is not YAML or not a mapping, or is over
    the limits (checked before it is parsed, and on its values as aliases expand them)."""
    if len(text) > MAX_SPEC_BYTES or len(text.encode()) > MAX_SPEC_BYTES:
        raise SpecError(source, [_too_large(len(text.encode()))])
    try:
        data = yaml.load(text, Loader=LOADER)
    except yaml.YAMLError as error:
        raise SpecError(source, [f"not valid YAML: {error}"]) from None
    except RecursionError:
        raise SpecError(source, [f"nested too deeply (at most {MAX_SPEC_DEPTH} levels)"]) from None
    problem = size_problem(data)
    if problem:
        raise SpecError(source, [problem])
    if not isinstance(data, Mapping):
        kind = "nothing" if data is None else f"a {type(data).__name__}"
        raise SpecError(source, [f"the spec must be a mapping of keys to values (family:, "
                                 f"...), got {kind}"])
    return data


def _too_large(size: int) -> str:
    return f"{size:,} bytes: a spec may have at most {MAX_SPEC_BYTES:,} bytes"


def size_problem(data: Any, max_values: int = MAX_SPEC_VALUES,
                 max_depth: int = MAX_SPEC_DEPTH) -> str | None:
    """Why `data` (parsed YAML or JSON) is too large, counting every value as often as aliases
    repeat it, or too deep; None when it is within the limits. Stops at the first limit, so an
    alias bomb or a value that contains itself costs at most `max_values` steps."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    values = 0
    while stack:
        value, depth = stack.pop()
        values += 1
        if values > max_values:
            return (f"more than {max_values:,} values once YAML aliases are expanded: a spec "
                    "may have at most that many")
        if depth > max_depth:
            return f"nested too deeply (at most {max_depth} levels)"
        if isinstance(value, Mapping):
            stack += [(item, depth + 1) for pair in value.items() for item in pair]
        elif isinstance(value, list | tuple):
            stack += [(item, depth + 1) for item in value]
    return None


def check_cell_count(source: str, count: int) -> None:
    """SpecError when a spec would expand to more than MAX_CELLS cells; called with the
    product of its dimensions before they are expanded."""
    if count > MAX_CELLS:
        raise SpecError(source, [f"expands to {count:,} cells: a spec may have at most "
                                 f"{MAX_CELLS:,} (split it into several jobs)"])
