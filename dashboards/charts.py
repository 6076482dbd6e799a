"""Plotly figure JSON. Names come from uploads and plotly renders a subset of HTML in
labels, so every string shown in a chart goes through `esc`."""

from __future__ import annotations

import html
import math
from typing import Any

INF = math.inf
GREEN, RED, GREY = "#1a7f37", "#cf222e", "#6e7781"
DIVERGING = [[0.0, "#cf222e"], [0.5, "#f6f8fa"], [1.0, "#1a7f37"]]  # worse .. better


def esc(text: Any) -> str:
    return html.escape(str(text), quote=False)


def layout(title: str, **extra: Any) -> dict[str, Any]:
    return {"title": {"text": esc(title)}, "margin": {"l": 60, "r": 20, "t": 50, "b": 60},
            "hovermode": "closest", **extra}


def heatmap(title: str, x: list[str], y: list[str], z: list[list[float | None]],
            text: list[list[str]], colorbar: str, midpoint: float | None = None,
            hover: list[list[str]] | None = None) -> dict:
    """`text` is shown in the cells; `hover`, when given, on hover instead of it."""
    trace = {"type": "heatmap", "x": [esc(v) for v in x], "y": [esc(v) for v in y], "z": z,
             "text": [[esc(cell) for cell in row] for row in text],
             "texttemplate": "%{text}", "hovertemplate": "%{y} %{x}: %{text}<extra></extra>",
             "colorscale": DIVERGING, "colorbar": {"title": {"text": esc(colorbar)}},
             "hoverongaps": False}
    if hover is not None:
        trace["customdata"] = [[esc(cell) for cell in row] for row in hover]
        trace["hovertemplate"] = "%{y} %{x}: %{customdata}<extra></extra>"
    if midpoint is not None:
        trace["zmid"] = midpoint
    return {"data": [trace], "layout": layout(
        title, xaxis={"type": "category", "automargin": True},
        yaxis={"type": "category", "automargin": True},
        height=max(320, 60 + 42 * len(y)))}


def lines(title: str, series: list[dict[str, Any]], y_title: str,
          shapes: list[dict] | None = None) -> dict:
    """series: {"name", "x", "y"} and, for the hover, either "text" (a label a point, from
    uploads, so escaped) or "customdata" (numbers a point) with "hover", the template
    showing them (`%{customdata[0]}`): numbers need no per-point string made, escaped or
    sent. None in y is a gap (a missing point)."""
    data = []
    escaped: dict[str, str] = {}  # a label a commit recurs on every line: escaped once
    for item in series:
        trace = {"type": "scatter", "mode": "lines+markers", "name": esc(item["name"]),
                 "x": item["x"], "y": [value if value is not None and -INF < value < INF
                                       else None for value in item["y"]],  # NaN: None
                 "connectgaps": False}
        hover = ""
        if item.get("customdata"):
            trace["customdata"] = item["customdata"]
            hover = "<br>" + item["hover"]
        elif item.get("text"):
            trace["text"] = [escaped.get(text) or escaped.setdefault(text, esc(text))
                             for text in item["text"]]
            hover = "<br>%{text}"
        trace["hovertemplate"] = f"%{{x}}<br>%{{y:.4g}}{hover}<extra>%{{fullData.name}}</extra>"
        data.append(trace)
    return {"data": data, "layout": layout(title, yaxis={"title": {"text": esc(y_title)}},
                                           shapes=shapes or [], showlegend=True,
                                           legend={"orientation": "h"})}
