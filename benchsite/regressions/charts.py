"""Plotly figures of a series with its detected changes marked, as JSON-able dicts.

Series and model names come from uploads: every name that reaches a label, a title or a
hover text is HTML-escaped here (plotly renders a subset of HTML in them), and pages embed
the figure with `json_script`.

A pass/fail series (string results such as "pass", "fail_accuracy": `comparison.outcomes`)
is drawn as a strip of pass and fail markers over its commits instead of a line.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple

import numpy as np
from django.utils.html import escape

from benchsite.comparison import outcomes
from benchsite.regressions.groups import CHANGE_TEXTS
from benchsite.regressions.models import Regression
from benchsite.results import environment_marks
from benchsite.results.models import Series
from benchsite.results.models import repetitions as repetitions_of

COLOURS = {
    Regression.Kind.REGRESSION: "#cf222e",
    Regression.Kind.IMPROVEMENT: "#1a7f37",
    Regression.Kind.SUSPICIOUS: "#bc4c00",
    Regression.Kind.CHANGE: "#8250df",
}
TRIAGED_AWAY = "#8c959f"  # expected or false positive
BAND_POINTS = 30  # points before a change that its baseline band and noise come from
LABEL_SPAN = 0.14  # of the chart's time span: labels of changes closer than this are stacked
LABEL_ROW_PX = 16


class Point(NamedTuple):
    """A result as a chart draws it: its time, median and repetitions, string results and
    commit. Read as plain rows (`points`): 400 results with their runs as model instances
    took about 8 ms of a regression's page."""

    timestamp: datetime
    value: float | None
    values: list[float] | None
    string_values: list[str] | None
    head_sha: str
    head_branch: str

    @property
    def repetitions(self) -> list[float]:
        return repetitions_of(self.values, self.value)


def points(results) -> list[Point]:
    """A queryset of results as chart points, in its order."""
    return [Point(*row) for row in results.values_list(
        "timestamp", "value", "values", "string_values", "run__head_sha", "run__head_branch")]


def series_chart_payload(series: Series, results: Iterable[Point],
                         regressions: Iterable[Regression] | None = None, *,
                         repetitions: bool = True) -> dict:
    """A plotly figure ({"data": [...], "layout": {...}}) of a series: its median per point
    (a line; hover: value and commit), every repetition (faint markers; `repetitions=False`
    leaves them out), and for each regression (default: all of the series') the change
    point (a vertical line and a label), the commit range last good .. first bad (a shaded
    span) and the baseline band (baseline +- noise before the change); and the changes of
    the environment on the series' device over the points (`environment_marks`).

    A series whose results are pass/fail outcomes (text, no numbers) is a strip of markers
    instead (`_outcome_strip`), with the same marks of its regressions.

    `results`: the series' points (`points`) ordered by timestamp, all of one history (a
    branch: a page passes only its own branch's results)."""
    results = list(results)
    if regressions is None:
        regressions = series.regressions.all()
    if is_pass_fail(results):
        return _with_environment(series, results,
                                 _outcome_strip(series, results, regressions))
    x = [result.timestamp.isoformat() for result in results]
    data = []
    if repetitions:
        rep_x = [when for when, result in zip(x, results, strict=True)
                 for _ in result.repetitions]
        rep_y = [value for result in results for value in result.repetitions]
        data.append({"type": "scatter", "mode": "markers", "name": "repetitions", "x": rep_x,
                     "y": rep_y, "marker": {"size": 4, "color": "rgba(87, 96, 106, 0.35)"},
                     "hoverinfo": "y"})
    data.append({
        "type": "scatter", "mode": "lines+markers", "name": "median", "x": x,
        "y": [result.value for result in results],
        "text": [escape(f"{result.head_sha[:10]} {result.head_branch}")
                 for result in results],
        "hovertemplate": "%{y:.4g}<br>%{x}<br>%{text}<extra></extra>",
        "line": {"color": "#0969da", "width": 1.5}, "marker": {"size": 5},
    })
    shapes, annotations = [], []
    for regression in regressions:
        _mark(regression, results, shapes, annotations)
    rows = _stack_labels(annotations, results)
    layout = {
        "title": {"text": escape(str(series)), "font": {"size": 14}},
        "xaxis": {"type": "date"},
        "yaxis": {"title": {"text": escape(series.metric)}},
        "hovermode": "closest", "shapes": shapes, "annotations": annotations,
        "margin": {"t": 60 + LABEL_ROW_PX * (rows - 1), "r": 20},
        "legend": {"orientation": "h"},
    }
    return _with_environment(series, results, {"data": data, "layout": layout})


def _with_environment(series: Series, results: list[Point], figure: dict) -> dict:
    """The figure with the environment changes of the results' branch on the series'
    device between its first and its latest point marked."""
    if len(results) < 2:
        return figure
    changes = environment_marks.changes_for(
        series.repo, results[-1].head_branch, results[0].timestamp,
        results[-1].timestamp, [series.arch], [series.device])
    return environment_marks.mark(figure, changes, [series.arch])


def is_pass_fail(results: list[Point]) -> bool:
    """Whether these results are pass/fail outcomes: text results and no numbers."""
    return (any(result.string_values for result in results)
            and not any(result.value is not None for result in results))


PASS, FAIL, OTHER = "pass", "fail", "not judged"  # the strip's rows
OUTCOME_COLOURS = {PASS: "#1a7f37", FAIL: "#cf222e", OTHER: "#8c959f"}


def _outcome_strip(series: Series, results: list[Point],
                   regressions: Iterable[Regression]) -> dict:
    """A pass/fail series: one marker per result on a "pass" or a "fail" row (skipped or
    empty outcomes on a "not judged" row), coloured by outcome; hover: the outcome's text,
    the commit and the time."""
    rows: dict[str, list[Point]] = {PASS: [], FAIL: [], OTHER: []}
    for result in results:
        passed = outcomes.passes(result.string_values)
        rows[OTHER if passed is None else PASS if passed else FAIL].append(result)
    data = [{
        "type": "scatter", "mode": "markers", "name": row,
        "x": [result.timestamp.isoformat() for result in shown],
        "y": [row] * len(shown),
        "text": [escape(f"{outcomes.text(result.string_values) or '(empty)'}: "
                        f"{result.head_sha[:10]} {result.head_branch}")
                 for result in shown],
        "hovertemplate": "%{text}<br>%{x}<extra></extra>",
        "marker": {"size": 9, "symbol": "square", "color": OUTCOME_COLOURS[row]},
    } for row, shown in rows.items() if shown or row != OTHER]
    shapes, annotations = [], []
    for regression in regressions:
        _mark(regression, results, shapes, annotations)
    label_rows = _stack_labels(annotations, results)
    categories = [FAIL, PASS] + ([OTHER] if rows[OTHER] else [])
    layout = {
        "title": {"text": escape(str(series)), "font": {"size": 14}},
        "xaxis": {"type": "date"},
        "yaxis": {"title": {"text": escape(series.metric)}, "type": "category",
                  "categoryorder": "array", "categoryarray": categories,
                  "range": [-0.5, len(categories) - 0.5]},
        "hovermode": "closest", "shapes": shapes, "annotations": annotations,
        "margin": {"t": 60 + LABEL_ROW_PX * (label_rows - 1), "r": 20},
        "legend": {"orientation": "h"},
    }
    return {"data": data, "layout": layout}


def _mark(regression: Regression, results: list[Point], shapes: list, annotations: list) -> None:
    colour = COLOURS[regression.kind] if regression.state not in (
        Regression.State.EXPECTED, Regression.State.FALSE_POSITIVE) else TRIAGED_AWAY
    change = regression.first_bad_at.isoformat()
    if regression.last_good_at is not None:
        shapes.append({"type": "rect", "xref": "x", "yref": "paper",
                       "x0": regression.last_good_at.isoformat(), "x1": change, "y0": 0,
                       "y1": 1, "fillcolor": colour, "opacity": 0.12, "line": {"width": 0}})
    shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": change, "x1": change,
                   "y0": 0, "y1": 1, "line": {"color": colour, "width": 1.5, "dash": "dot"}})
    before = [result for result in results
              if result.timestamp < regression.first_bad_at and result.value][-BAND_POINTS:]
    if before:
        noise = _relative_noise([result.value for result in before])
        shapes.append({"type": "rect", "xref": "x", "yref": "y",
                       "x0": before[0].timestamp.isoformat(), "x1": change,
                       "y0": regression.baseline * (1 - noise),
                       "y1": regression.baseline * (1 + noise),
                       "fillcolor": "#0969da", "opacity": 0.1, "line": {"width": 0}})
    size = CHANGE_TEXTS.get(regression.detector) or f"{regression.magnitude:+.1%}"
    label = f"{regression.get_kind_display()} {size}"
    annotations.append({
        "x": change, "y": 1, "xref": "x", "yref": "paper", "yanchor": "bottom",
        "text": escape(label), "showarrow": False, "font": {"color": colour, "size": 11},
        "hovertext": escape(f"{regression.last_good_sha[:10] or '?'} .. "
                            f"{regression.first_bad_sha[:10]} ({regression.get_state_display()})"),
    })


def _stack_labels(annotations: list[dict], results: list[Point]) -> int:
    """Lift the label of a change that sits close to an earlier one's onto a row above it,
    so that no two labels overlap; the number of rows used."""
    times = [result.timestamp.timestamp() for result in results]
    for label in annotations:
        times.append(datetime.fromisoformat(label["x"]).timestamp())
    if not annotations:
        return 1
    span = max(max(times) - min(times), 1.0)
    ends: list[float] = []  # per row, the time of its last label
    placed = sorted((datetime.fromisoformat(label["x"]).timestamp(), n, label)
                    for n, label in enumerate(annotations))
    for at, _, label in placed:
        row = next((i for i, end in enumerate(ends) if at - end >= LABEL_SPAN * span),
                   len(ends))
        if row == len(ends):
            ends.append(at)
        ends[row] = at
        label["yshift"] = LABEL_ROW_PX * row
    return len(ends)


def _relative_noise(values: list[float]) -> float:
    """Noise of one point, relative: the scaled MAD of log differences (0 for < 3 points)."""
    logs = np.log([value for value in values if value > 0])
    if len(logs) < 3:
        return 0.0
    return float(1.4826 * np.median(np.abs(np.diff(logs))) / np.sqrt(2))
