"""Queries and numbers shared by the dashboard pages."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import CharField, Func, Max, QuerySet
from django.urls import reverse

from benchsite.comparison.directions import HIGHER
from benchsite.results.models import RunBenchmark


@dataclass(frozen=True)
class Interval:
    """A measured value's 95% confidence interval, as the runner's paired timing stores it in
    metric.extra_info (runner.paired). `low`/`high` are None when too few pairs gave none;
    `unstable`: the interval stayed wider than the runner's target."""

    low: float | None
    high: float | None
    pairs: int | None = None
    unstable: bool = False
    method: str | None = None  # how a GPU timed it: "cuda_graph ×37/12, L2 warm"

    @property
    def known(self) -> bool:
        return self.low is not None and self.high is not None

    def contains(self, value: float) -> bool:
        return self.known and self.low <= value <= self.high

    def overlaps(self, other: Interval) -> bool:
        return (self.known and other.known
                and self.low <= other.high and other.low <= self.high)

    def bounds(self) -> str | None:
        return f"{self.low:.2f}–{self.high:.2f}" if self.known else None

    def describe(self) -> str:
        """"95% CI 1.02–2.60, 12 pairs, unstable"."""
        parts = [f"95% CI {self.bounds()}" if self.known else "no 95% CI"]
        if self.pairs is not None:
            parts.append(f"{self.pairs} pairs")
        if self.unstable:
            parts.append("unstable")
        if self.method:
            parts.append(self.method)
        return ", ".join(parts)


def interval_of(extra_info: Any) -> Interval | None:
    """The interval a result's extra_info carries; None for records without one (older
    records, other families). Uploads are untrusted: a value of the wrong type is unknown."""
    if not isinstance(extra_info, dict) or not {"ci_low", "unstable"} & extra_info.keys():
        return None
    pairs = extra_info.get("pairs")
    return Interval(_finite(extra_info.get("ci_low")), _finite(extra_info.get("ci_high")),
                    pairs if type(pairs) is int else None, extra_info.get("unstable") is True,
                    gpu_method(extra_info))


GPU_METHODS = ("cuda_graph", "batched", "per_call")  # runner.engine.gpu_blocks
L2_POLICIES = ("warm", "flushed", "rotated")


def gpu_method(extra_info: dict) -> str | None:
    """How a GPU timed a speedup, as the runner states it (`timing_method`,
    `calls_per_block`, `l2`): "cuda_graph ×37/12, L2 warm"; None on a CPU or where the
    record does not say (older records). Only the runner's own words are shown."""
    method = extra_info.get("timing_method")
    if method not in GPU_METHODS:
        return None
    calls = extra_info.get("calls_per_block")
    if (isinstance(calls, list) and calls
            and all(type(n) is int and 0 < n < 10**9 for n in calls)):
        method += " ×" + "/".join(str(n) for n in calls)
    l2 = extra_info.get("l2")
    return f"{method}, L2 {l2}" if l2 in L2_POLICIES else method


SUSPECT_TEXT = 300  # characters of an uploaded reason or kernel name shown


@dataclass(frozen=True)
class Suspect:
    """Why the runner found a result's numbers suspect (a quantized model far slower than
    bf16, an SQNR that makes no sense), and the kernel its time went to: shown, never
    coloured as an ordinary result."""

    reason: str
    top_kernel: str | None = None  # "name (total ms)" of the profiled calls

    def describe(self) -> str:
        """"suspect: speedup 0.0010x: ...; top kernel aten::mm (3.100 ms)"."""
        text = f"suspect: {self.reason}"
        return f"{text}; top kernel {self.top_kernel}" if self.top_kernel else text


def suspect_of(extra_info: Any) -> Suspect | None:
    """The suspicion a result's extra_info carries (runner.quant.records); None without one.
    Uploads are untrusted: a reason that is not text is none, a malformed kernel unknown."""
    if not isinstance(extra_info, dict) or not isinstance(extra_info.get("suspect"), str):
        return None
    kernels = extra_info.get("top_kernels")
    top = kernels[0] if isinstance(kernels, list) and kernels else None
    name = top.get("name") if isinstance(top, dict) else None
    kernel = None
    if isinstance(name, str):
        total = _finite(top.get("total_ms"))
        kernel = name[:SUSPECT_TEXT] + (f" ({total:.3f} ms)" if total is not None else "")
    return Suspect(extra_info["suspect"][:SUSPECT_TEXT], kernel)


def _finite(value: Any) -> float | None:
    if type(value) not in (int, float) or not math.isfinite(value):
        return None
    return float(value)


def within_noise(a: Interval | None, b: Interval | None) -> bool:
    """Whether the difference of two measured values is inside their noise: both intervals
    known and overlapping, or either measurement unstable. False when an interval is
    unknown (older records), so those compare as before."""
    if any(interval is not None and interval.unstable for interval in (a, b)):
        return True
    return a is not None and b is not None and a.overlaps(b)


def geomean_interval(measured: Iterable[tuple[float, Interval | None]]) -> Interval | None:
    """An approximate 95% interval of the geomean of independently measured positive values:
    each interval read as ±1.96 standard errors of the log value, so their half-widths add
    in quadrature. None when none of the values has an interval (older records); unknown
    and unstable when only some have one."""
    measured = list(measured)
    intervals = [interval for _, interval in measured]
    if all(interval is None for interval in intervals):
        return None
    if not all(interval and interval.known and interval.low > 0 and value > 0
               for value, interval in measured):
        return Interval(None, None, unstable=True)
    centre = sum(math.log(value) for value, _ in measured) / len(measured)
    half = math.sqrt(sum(((math.log(i.high) - math.log(i.low)) / 2) ** 2
                         for i in intervals)) / len(measured)
    return Interval(math.exp(centre - half), math.exp(centre + half))


def measured_text(value: float, interval: Interval | None, unit: str = "x") -> str:
    """"1.81x (95% CI 1.02–2.60, 12 pairs, unstable)", or "1.81x" without an interval."""
    text = f"{value:.2f}{unit}"
    return f"{text} ({interval.describe()})" if interval else text


def spread_of(values: Any) -> float | None:
    """Relative spread of a result's repetitions: the interquartile range over the median
    with 4+ repetitions, the half range over the median with 2-3; None with fewer, a zero
    median or values that are not numbers (uploads are untrusted)."""
    if not isinstance(values, list):
        return None
    finite = sorted(float(v) for v in values
                    if type(v) in (int, float) and math.isfinite(v))
    if len(finite) < 2:
        return None
    middle = statistics.median(finite)
    if middle == 0:
        return None
    if len(finite) >= 4:
        low, _, high = statistics.quantiles(finite, n=4, method="inclusive")
        return (high - low) / abs(middle)
    return (finite[-1] - finite[0]) / 2 / abs(middle)


def spread_text(values: Any, extra_info: Any) -> str | None:
    """What a result says of its own noise: its 95% interval (paired timing) or the spread
    of its repetitions, and "unstable" where the runner said so; None when it says nothing."""
    interval = interval_of(extra_info)
    if interval is not None:
        return interval.describe()
    spread = spread_of(values)
    if spread is None:
        return None
    label = "IQR" if len(values) >= 4 else "half range"
    return f"{label} {spread:.1%} of the median, {len(values)} repetitions"


def sanity_verdict(speedup: float, interval: Interval | None) -> tuple[bool, str]:
    """(suspect, verdict) on a baseline-vs-baseline speedup: suspect when its interval
    excludes 1.00, "ok" when it holds it."""
    if interval is None or not interval.known:
        return False, "no 95% CI: cannot tell"
    if interval.contains(1.0):
        return False, "ok"
    return True, (f"off by {speedup - 1:+.1%} — outside its 95% CI: measurements of this "
                  "run are suspect")


def geomean(values: Iterable[float | None]) -> float | None:
    """Geometric mean of the positive finite values; None when there are none."""
    logs = [math.log(v) for v in values if v is not None and 0 < v < math.inf]
    return math.exp(sum(logs) / len(logs)) if logs else None


def latest_shas(repo: str, benchmark: str, branch: str, limit: int = 120,
                arch: str | None = None) -> list[tuple]:
    """(sha, time) of the latest commits with results of `benchmark` (on `arch`, when
    given), newest first."""
    runs = RunBenchmark.objects.filter(repo=repo, benchmark=benchmark, branch=branch,
                                       **({"arch": arch} if arch else {}))
    # Each commit's newest run among the latest runs (several runs a commit: devices, reruns),
    # grouped by the database: a thousand rows' datetimes cost more to convert than to read.
    latest = runs.order_by("-timestamp", "-run_id").values("pk")[: limit * 10]
    return list(runs.filter(pk__in=latest).values("head_sha").annotate(at=Max("timestamp"))
                .order_by("-at", "-head_sha").values_list("head_sha", "at")[:limit])


def change_class(change: float | None, threshold: float, direction: str | None,
                 noisy: bool = False) -> str:
    """CSS class of a relative change: "better"/"worse" beyond the threshold, given which way
    is better for the metric ("higher"/"lower"); "" when within it, unknown, or `noisy`
    (inside the measurements' noise, see `within_noise`)."""
    if change is None or direction is None or noisy:
        return ""
    better = change if direction == HIGHER else -change
    return "better" if better > threshold else "worse" if better < -threshold else ""


def page_url(route: str, *args, **params) -> str:
    """A page's URL with query parameters, the empty ones left out. `route` is a route name
    ("dashboards:explorer", `args` filling its path) or a path reverse() gave (a table's
    thousand links reverse their route once)."""
    path = route if route.startswith("/") else reverse(route, args=args)
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"{path}?{query}"


def compare_url(repo: str, base: str, head: str, **params) -> str:
    """The comparison page of two commits; "" when they are the same or one is unknown."""
    if not base or not head or base == head:
        return ""
    return page_url("dashboards:compare", base, head, repo=repo, **params)


class IsoUtc(Func):
    """A timestamp as ISO 8601 text in UTC, "2026-11-21T03:00:00+00:00" (whole seconds, as
    results store them), formatted by the database: parsing and formatting the thousands of
    timestamps of a chart in Python costs more than the query."""

    output_field = CharField()

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, template=(
            "to_char(%(expressions)s AT TIME ZONE 'UTC', "
            "'YYYY-MM-DD\"T\"HH24:MI:SS\"+00:00\"')"), **extra)

    def as_sqlite(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection,
                           template="strftime('%%%%Y-%%%%m-%%%%dT%%%%H:%%%%M:%%%%S+00:00', "
                                    "%(expressions)s)", **extra)


def plain_tuples(queryset: QuerySet) -> list[tuple]:
    """`plain_rows` as tuples, in the `values_list()` queryset's order of columns (a JSON
    field comes as its text)."""
    return _plain(queryset)[1]


def plain_rows(queryset: QuerySet) -> list[dict[str, Any]]:
    """The rows of a `values()` queryset as dicts by column name, read with a cursor (on the
    database the queryset would read): without Django's converters, which call float() or
    int() on every value the driver has already typed (on a year of trends, 3,000 rows, a
    quarter of the page's Python). Only for text and numbers: a datetime stays as the driver
    gives it, and a field must be named as its column."""
    names, rows = _plain(queryset)
    return [dict(zip(names, row, strict=True)) for row in rows]


def _plain(queryset: QuerySet) -> tuple[list[str], list[tuple]]:
    try:
        sql, params = queryset.query.sql_with_params()
    except EmptyResultSet:  # a filter that matches nothing, such as `pk__in=[]`
        return [], []
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(sql, params)
        return [column[0] for column in cursor.description], cursor.fetchall()
