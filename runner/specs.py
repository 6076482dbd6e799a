"""Spec files of every family: reading them, and the one error type that lists their problems."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

DEFAULT_FAMILY = "quantization"  # of a spec without `family:`: torchao's configs run unchanged


class SpecError(ValueError):
    """A spec is unusable; the message names the file and every key path at fault."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        if len(problems) == 1:
            message = f"{source}: {problems[0]}"
        else:
            listed = "\n".join(f"  {p}" for p in problems)
            message = f"{source}: {len(problems)} problems:\n{listed}"
        super().__init__(message)


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
        text = Path(path).read_text()
    except OSError as error:
        raise SpecError(source, [f"cannot read: {error.strerror or error}"]) from None
    return parse_yaml(text, source)


def parse_yaml(text: str, source: str) -> Mapping:
    """The spec's mapping; SpecError when the text is not YAML or not a mapping."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise SpecError(source, [f"not valid YAML: {error}"]) from None
    if not isinstance(data, Mapping):
        kind = "nothing" if data is None else f"a {type(data).__name__}"
        raise SpecError(source, [f"the spec must be a mapping of keys to values (family:, "
                                 f"...), got {kind}"])
    return data
