"""Environment changes (`environment_changes`) marked on a time chart: a dashed vertical
line at each, with a label "environment: <summary>" along it (cut short; the whole text
in its hover). One place for the trends, explorer and regression charts.

Labels stand upright inside the plot, so changes close in time and the regression chart's
own labels above the plot never overlap them.
"""

from __future__ import annotations

import html
from collections.abc import Collection
from datetime import datetime

from benchsite.results.environment_changes import in_range
from benchsite.results.models import EnvironmentChange

COLOUR = "#9a6700"
NAME = "environment"  # the marks' shapes and annotations, as plotly names them
MAX_CHANGES = 200  # the latest changes of a chart's range read
LABEL_CHARS = 56


def changes_for(repo: str, branch: str, start: datetime, end: datetime,
                archs: Collection[str], devices: Collection[str] | None = None,
                ) -> list[EnvironmentChange]:
    """The changes of a repo's branch at times in (start, end] on these archs (and device
    types, when given), oldest first, in one query. One per device, summary and day: every
    job on a machine records the same new nightly."""
    if not archs:
        return []
    found = in_range(repo, branch, start, end).filter(arch__in=archs)
    if devices is not None:
        found = found.filter(device__in=devices)
    latest = found.order_by("-at", "-pk").only(
        "at", "device", "arch", "summary", "after_run_id")[:MAX_CHANGES]
    kept: dict[tuple, EnvironmentChange] = {}
    for change in reversed(list(latest)):
        kept.setdefault((change.device, change.arch, change.summary, change.at.date()), change)
    return list(kept.values())


def mark(figure: dict, changes: list[EnvironmentChange], archs: Collection[str]) -> dict:
    """Add to a plotly figure a line and a label per change on `archs` (the devices the
    figure shows), the label naming the device when it shows several; returns the figure."""
    layout = figure["layout"]
    shapes = layout.setdefault("shapes", [])
    annotations = layout.setdefault("annotations", [])
    for change in changes:
        if change.arch not in archs:
            continue
        at = change.at.isoformat()
        text = _label(change, several=len(archs) > 1)
        shapes.append({"type": "line", "name": NAME, "xref": "x", "yref": "paper",
                       "x0": at, "x1": at, "y0": 0, "y1": 1,
                       "line": {"color": COLOUR, "width": 1, "dash": "dash"}})
        annotations.append({
            "name": NAME, "x": at, "y": 1, "xref": "x", "yref": "paper", "textangle": -90,
            "xanchor": "left", "yanchor": "top", "showarrow": False,
            "font": {"color": COLOUR, "size": 10},
            "text": html.escape(_cut(text), quote=False),
            "hovertext": html.escape(text, quote=False)})
    return figure


def _label(change: EnvironmentChange, several: bool = False) -> str:
    """'environment: <summary>', or 'environment (<arch>): <summary>' on a chart of several
    devices."""
    where = f" ({change.arch or change.device})" if several else ""
    return f"environment{where}: {change.summary}"


def _cut(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[:LABEL_CHARS - 1] + "…"
