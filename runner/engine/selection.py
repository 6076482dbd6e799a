"""`--cells REGEX`: the cells of a spec whose key a regular expression matches (re.search, as
a bisect's `cells` does; `^KEY$` with the key re.escape'd selects that one cell)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, TypeVar

from runner.engine.specs import SpecError

LISTED = 10  # keys named when a pattern selects none


class Keyed(Protocol):
    @property
    def key(self) -> str: ...


Cell = TypeVar("Cell", bound=Keyed)


def one_cell(key: str) -> str:
    """The pattern that selects the cell `key` and no other."""
    return f"^{re.escape(key)}$"


def select(cells: Sequence[Cell], pattern: str | None, source: str) -> list[Cell]:
    """The cells whose key `pattern` matches (all of them without one); SpecError when it is
    no regular expression or matches none."""
    if not pattern:
        return list(cells)
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        raise SpecError(source, [f"--cells: {pattern!r} is not a regular expression: "
                                 f"{error}"]) from None
    chosen = [cell for cell in cells if compiled.search(cell.key)]
    if not chosen:
        keys = ", ".join(cell.key for cell in cells[:LISTED])
        more = f" and {len(cells) - LISTED} more" if len(cells) > LISTED else ""
        raise SpecError(source, [f"--cells: {pattern!r} selects none of the spec's "
                                 f"{len(cells)} cells: {keys}{more}"])
    return chosen
