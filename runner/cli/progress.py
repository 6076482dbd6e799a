"""Progress of a long command: a tqdm bar on stderr when stderr is a terminal; otherwise
(logs, CI) one line per item on stdout. --quiet keeps only the failures, which are always
printed as they happen, above the bar."""

from __future__ import annotations

import sys


class Progress:
    def __init__(self, total: int, unit: str, *, quiet: bool = False, done: int = 0):
        from tqdm import tqdm  # the runner extra's: --list and --dry-run need the base only

        self.bar = tqdm(total=total, initial=done, unit=unit, file=sys.stderr,
                        disable=True if quiet else None, dynamic_ncols=True)
        self.lines = not quiet and self.bar.disable

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()

    def item(self, line: str, *, failed: bool = False, status: str = "") -> None:
        """One item ended: its line (printed when failed, or when there is no bar)."""
        if failed or self.lines:
            self.bar.write(line, file=sys.stdout)
        if status:
            self.bar.set_postfix_str(status, refresh=False)
        self.bar.update()
