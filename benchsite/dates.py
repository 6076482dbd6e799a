"""The times a URL filter or an upload may give: what every database stores and every page
can compute with, so that a time out of reach is refused by name instead of failing in the
database (PostgreSQL refuses a time-zone offset beyond ±15:59; SQLite's times and the pages'
date arithmetic are Python's, whose datetime ends in year 9999). Imports no Django.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
# A year short of datetime's end: pages add ranges of up to a year to a filter's dates.
LATEST = datetime(9999, 1, 1, tzinfo=UTC)
MAX_OFFSET = timedelta(hours=15, minutes=59)
RANGE = f"from {EARLIEST:%Y-%m-%d} to {LATEST:%Y-%m-%d} (UTC)"


def problem(value: datetime) -> str | None:
    """Why `value` is out of reach, or None; a naive value is taken as UTC."""
    offset = value.utcoffset()
    if offset is not None and abs(offset) > MAX_OFFSET:
        sign = "-" if offset < timedelta(0) else "+"
        hours, rest = divmod(int(abs(offset).total_seconds()), 3600)
        return (f"time-zone offset {sign}{hours:02d}:{rest // 60:02d} is beyond ±15:59, "
                "the widest a database stores")
    aware = value if offset is not None else value.replace(tzinfo=UTC)
    if not EARLIEST <= aware < LATEST:
        return f"{value.isoformat()} is out of range: times go {RANGE}"
    return None


def timestamp_problem(seconds: float) -> str | None:
    """Why Unix `seconds` are out of reach, or None."""
    if EARLIEST.timestamp() <= seconds < LATEST.timestamp():
        return None
    hint = " (milliseconds? send seconds)" if seconds >= LATEST.timestamp() else ""
    return (f"{seconds:.0f} is out of range: Unix seconds go from {EARLIEST.timestamp():.0f} "
            f"to {LATEST.timestamp():.0f}, {RANGE}{hint}")
