"""Comparing the results of two commits of a repo, series by series, each judged against
its own history on the repo's default branch (`judge`).

`compare_commits(repo, base, head, settings=..., changes=..., **filters) -> Comparison`
resolves the commits (a unique prefix of a stored sha is enough), reads the results of both
with one query (joined with their series) and the default-branch history of those series up
to the base commit with another. A series' value at a commit is the median of all
repetitions of all its results there, and the head's runs count as that many measurements
of it (`judge.judge`'s `head_runs`: re-running a head commit narrows its value). A pass/fail
series (a model's accuracy check: string results) is judged by its outcomes
(`judge.outcome`), shown as 1 for a pass and 0 for a failure; a cell's status series (the
runner records one for a cell it skipped or that failed) is a regression where the cell
fails at the head and not at the base (`judge.cell_status`); both are higher-is-better
(`outcomes.DIRECTION`), every other series as `directions` says. Raises `CannotCompare` for
an unknown repo, an unknown or ambiguous commit. The series judged on their history's noise
are held to a false discovery rate: `fdr` where given (a request's `?fdr=`), else the
settings' `compare_fdr`. With them, per device, the environments of both commits' runs and
what differs (`environments.between`: "did torch move with the code?"), one more query.

The rules come from the caller (`Settings`: the detection settings,
`regressions.DetectionSettings`, are one), and so do the changes detection recorded, where
a series' level starts (`changes`); `benchsite.regressions.comparisons` binds both.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from statistics import median
from typing import NamedTuple, Protocol

import msgspec
import orjson
import psycopg
from django.db import connection
from django.db.models.fields.json import KeyTextTransform
from psycopg.types.json import set_json_loads

from benchsite.caching import ProcessCache
from benchsite.comparison import environments, judge, outcomes, stored_baselines
from benchsite.comparison.directions import better_for
from benchsite.comparison.environments import EnvironmentDiff
from benchsite.comparison.history import History, recent
from benchsite.comparison.judge import (
    IMPROVEMENT,
    REGRESSION,
    STATES,
    Rules,
    Verdict,
)
from benchsite.comparison.outcomes import passes, text
from benchsite.gc_pause import gc_paused
from benchsite.results.models import Result, Run, Series, repetitions, run_spans
from runner.contract.status import FAILED, STATUS_METRIC


class Settings(Protocol):
    """What a comparison is judged with (`regressions.DetectionSettings` is one)."""

    lookback_points: int  # default-branch points up to the base that give level and noise
    min_history: int  # history points needed to judge the noise
    compare_significance: float  # Mann-Whitney level, with 4+ repetitions a side
    compare_fdr: float  # the false discovery rate, where the caller gives none

    def branches_for(self, repo: str) -> list[str]: ...

    def tolerance(self, metric: str, benchmark: str) -> float: ...


# Each series' recorded changes (first bad points, sorted) on these branches up to a time.
Changes = Callable[[list[int], list[str], datetime], dict[int, list[datetime]]]

FILTERS = ("benchmark", "model", "backend", "mode", "dtype", "device", "arch", "metric")
NO_COMMON = "no common results"
UNCHANGED = judge.UNCHANGED
MIN_PREFIX = 7  # characters of a sha a prefix needs (git's short sha)


class CannotCompare(Exception):
    """The comparison cannot be made: `reason` is "unknown_repo", "unknown_sha",
    "ambiguous_sha" or "short_sha"; the message says which and what is known."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


_ROWS_JSON = msgspec.json.Encoder()  # non-finite numbers as null, as orjson writes them


class Row(msgspec.Struct, gc=False):
    """One series in a comparison. Out of the cyclic garbage collector's sight (its fields are
    numbers and text: no cycle can go through it): the comparisons kept in RECENT and the
    compare page's views hold tens of thousands of rows, and every full collection walked
    them (70,000 rows: 80-100 ms, which landed on whatever request was running)."""

    series_id: int
    benchmark: str
    model: str
    backend: str
    mode: str
    dtype: str
    device: str
    arch: str
    metric: str
    direction: str | None  # "higher" / "lower" is better; None: unknown
    tolerance: float
    base: float | None  # median of the base commit's repetitions; None: missing
    head: float | None
    base_count: int  # repetitions
    head_count: int
    change: float | None  # head / base - 1
    level: float | None  # the default branch's level up to the base (history median)
    noise: float | None  # relative noise of one point in that history
    history: int  # history points it was judged with
    p_value: float | None  # of the head against the level, in noise units
    mw_p_value: float | None  # Mann-Whitney U (two-sided), with 4+ repetitions a side
    adjusted_p: float | None  # p_value adjusted over the comparison (Benjamini-Hochberg)
    head_runs: int  # runs the head's repetitions come from
    state: str  # one of judge.STATES
    held: str  # noisy: the state the false discovery rate held back ("" otherwise)
    rule: str  # which rule decided


@dataclass(frozen=True)
class Comparison:
    repo: str
    base_sha: str
    head_sha: str
    branches: list[str]  # the history's
    rows: list[Row]  # by state (regressions first, largest first), then the others
    fdr: float = Rules.fdr  # the false discovery rate its series were held to
    # per device (and job where they differ): the base's and head's environments
    environment: list[EnvironmentDiff] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        found = Counter(row.state for row in self.rows)
        return {state: found.get(state, 0) for state in STATES}

    @property
    def verdict(self) -> str:
        """"regression" if any series regressed, else "improvement" if any improved, else
        "unchanged"; "no common results" when no series has results at both commits."""
        counts = self.counts
        if counts[REGRESSION]:
            return REGRESSION
        if not any(row.base is not None and row.head is not None for row in self.rows):
            return NO_COMMON
        return IMPROVEMENT if counts[IMPROVEMENT] else UNCHANGED

    def as_json(self) -> bytes:
        """The comparison as JSON: the rows written by msgspec, the rest by orjson (18,000
        rows in ~20 ms where dataclasses.asdict and DRF's renderer took ~600 ms)."""
        return orjson.dumps({"repo": self.repo, "base": self.base_sha, "head": self.head_sha,
                             "branches": self.branches, "fdr": self.fdr,
                             "verdict": self.verdict,
                             "counts": self.counts, "environment": self.environment,
                             "rows": orjson.Fragment(_ROWS_JSON.encode(self.rows))})


def resolve(repo: str, sha: str) -> str:
    """The stored sha of `repo` that `sha` names: itself, or the one sha it is a prefix of
    (at least MIN_PREFIX characters). Raises CannotCompare naming what is known."""
    runs = Run.objects.filter(repo=repo)
    if not runs.exists():
        known = sorted(set(Run.objects.values_list("repo", flat=True).distinct()))
        near = difflib.get_close_matches(repo, known, n=3)
        raise CannotCompare("unknown_repo", f"repo {repo!r}: no results stored"
                            + (f"; did you mean {', '.join(near)}?" if near else
                               f"; known: {', '.join(known[:10]) or 'none'}"))
    if runs.filter(head_sha=sha).exists():
        return sha
    if len(sha) < MIN_PREFIX:
        raise CannotCompare("short_sha", f"commit {sha!r}: not a stored sha of {repo}, and "
                            f"too short for a prefix (needs {MIN_PREFIX}+ characters)")
    found = sorted(set(runs.filter(head_sha__startswith=sha)
                       .values_list("head_sha", flat=True)[:100]))
    if len(found) == 1:
        return found[0]
    if found:
        raise CannotCompare("ambiguous_sha", f"commit {sha!r} is a prefix of "
                            f"{len(found)} commits of {repo}: {', '.join(found[:5])}")
    raise CannotCompare("unknown_sha", f"commit {sha!r}: no results of {repo} at it")


# This process's recent comparisons, kept as objects (Django's cache framework pickles:
# unpickling a whole-repo comparison took ~80 ms). Threshold changes show within the TTL;
# the false discovery rate is in the key (a request's, else the setting's).
RECENT = ProcessCache(maxsize=32, ttl=600)


def recent_comparison(repo: str, base_sha: str, head_sha: str, *, fdr: float,
                      settings: Callable[[], Settings], changes: Changes,
                      **filters: str) -> Comparison:
    """`compare_commits`, kept for ten minutes in this process: two commits' results only
    change when one of their runs gains results, and that is in the key, with the false
    discovery rate used (`fdr`: the caller's, else its setting's: two rates never share a
    result). `settings` is called only when the comparison is not kept."""
    base_sha, head_sha = resolve(repo, base_sha), resolve(repo, head_sha)
    rate = judge.check_fdr(float(fdr))
    runs = Run.objects.filter(repo=repo, head_sha__in=[base_sha, head_sha]).order_by("pk")
    version = ",".join(f"{pk}-{count}" for pk, count in runs.values_list("pk", "result_count"))
    key = hashlib.sha256(repr((repo, base_sha, head_sha, sorted(filters.items()), version,
                               rate)).encode()).hexdigest()
    return RECENT.get_or_compute(
        key, lambda: _compare(repo, base_sha, head_sha, settings(), changes, filters, rate))


def compare_commits(repo: str, base_sha: str, head_sha: str, *, settings: Settings,
                    changes: Changes, fdr: float | None = None, **filters: str) -> Comparison:
    """Every series with results at either commit (narrowed by exact `filters` on series
    fields: benchmark, model, backend, mode, dtype, device, arch, metric), with its change,
    its state and the rule that decided, and a verdict; the series held to the false
    discovery rate `fdr` (default: the settings' `compare_fdr`). Raises ValueError for an
    unknown filter or an unusable rate, CannotCompare for an unknown repo or commit."""
    base_sha, head_sha = resolve(repo, base_sha), resolve(repo, head_sha)
    return _compare(repo, base_sha, head_sha, settings, changes, filters, fdr)


@dataclass
class _Found:
    """A comparison's results, bucketed by (series id, sha) and by series."""

    samples: dict[tuple[int, str], list[float]] = field(default_factory=dict)
    outcomes: dict[tuple[int, str], list[tuple[str, bool | None]]] = field(
        default_factory=dict)
    statuses: dict[tuple[int, str], list[tuple[str, str]]] = field(
        default_factory=dict)  # cells skipped or failed
    series: dict[int, _Series] = field(default_factory=dict)
    units: dict[int, str] = field(default_factory=dict)
    unstable: set[int] = field(default_factory=set)
    run_ids: set[int] = field(default_factory=set)  # the runs with results
    head_runs_of: dict[int, set[int]] = field(default_factory=dict)  # the head's runs

    @property
    def pass_fail(self) -> set[int]:
        return {pk for pk, _ in self.outcomes}

    @property
    def cells(self) -> set[int]:
        return {pk for pk, _ in self.statuses}


class _Judged(NamedTuple):
    """A series' first verdict, with what its row shows."""

    item: _Series
    verdict: Verdict
    direction: str | None
    base: list[float]
    head: list[float]
    points: int  # history points
    runs: int  # the head's runs


@gc_paused()  # (a context manager used as a decorator: one section per call)
def _compare(repo: str, base_sha: str, head_sha: str, settings: Settings, changes: Changes,
             filters: dict[str, str], fdr: float | None = None) -> Comparison:
    """`compare_commits` of two resolved shas: query, bucket, judge."""
    fdr = judge.check_fdr(settings.compare_fdr if fdr is None else fdr)
    unknown = sorted(set(filters) - set(FILTERS))
    if unknown:
        raise ValueError(f"unknown filter(s) {unknown}: use {list(FILTERS)}")
    branches = settings.branches_for(repo)
    commit_runs = list(Run.objects.filter(repo=repo, head_sha__in=[base_sha, head_sha]).only(
        "pk", "head_sha", "timestamp", "last_timestamp", "head_branch"))
    runs = {run.pk: (run.head_sha, run.timestamp, run.head_branch) for run in commit_runs}
    found = _bucket(_results(run_spans(commit_runs), filters), runs, head_sha)
    base_runs, head_runs = _runs(found.run_ids, runs, base_sha, head_sha)
    not_numeric = found.pass_fail | found.cells
    numeric = [pk for pk in found.series if pk not in not_numeric]
    histories = _baselines(numeric, base_runs, head_runs, branches, settings, changes)
    tolerances = _tolerances(found.series.values(), settings)
    judged = _judge(found, base_sha, head_sha, histories, tolerances, settings)
    held = judge.control([one.verdict for one in judged], fdr)
    compared = [_row(one.item, one.direction, tolerances[one.item.metric, one.item.benchmark],
                     verdict, one.base, one.head, one.points, one.runs)
                for one, verdict in zip(judged, held, strict=True)]
    order = {state: position for position, state in enumerate(STATES)}
    compared.sort(key=lambda row: (order[row.state], -abs(row.change or 0), row.series_id))
    environment = environments.between(repo, base_sha, head_sha, filters.get("device", ""),
                                       filters.get("arch", ""))
    return Comparison(repo, base_sha, head_sha, branches, compared, fdr, environment)


# `_results` on PostgreSQL: the same rows as the ORM's query, decoded by psycopg in C (the
# ORM's per-row converters of the JSON and float-array columns took 0.2 s of 0.3 s for the
# 37,600 results of an alert group's range).
RESULTS_SQL = f"""
SELECT r.series_id, r.run_id, r.value, r.values, r.string_values, r.extra_info ->> 'unit',
       r.extra_info ->> 'unstable', r.extra_info ->> 'error',
       {", ".join(f"s.{name}" for name in FILTERS)}
FROM {Result._meta.db_table} r JOIN {Series._meta.db_table} s ON s.id = r.series_id
WHERE ({{spans}}) AND (r.value IS NOT NULL OR r.string_values IS NOT NULL)
"""
# A span of runs (results.models.run_spans): their ids and their results' times.
SPAN_SQL = 'r.run_id = ANY(%s) AND r."timestamp" BETWEEN %s AND %s'


def _results(spans: list[tuple[list[int], datetime, datetime]],
             filters: dict[str, str]) -> Iterable:
    """Numeric results, and the string results of pass/fail series (accuracy) and cell
    statuses, of the runs of these spans (run ids, their results' times) in one query:
    (series id, run id, value, values, string values, unit, unstable, error, *the
    series' FILTERS fields). The runs were read first, so that their results are found
    by run id (the run index): joined to the runs instead, the planner scanned
    the whole results table (290 ms at 1M results, growing with it)."""
    wanted = {name: value for name, value in filters.items() if value}  # names: FILTERS
    if not spans:
        return []
    if connection.vendor == "postgresql":
        connection.ensure_connection()
        with psycopg.Cursor(connection.connection) as cursor:
            # (JSON decoded here, by orjson: Django's connection leaves it as text for its
            # fields, and psycopg's own loader calls the json module)
            set_json_loads(orjson.loads, cursor)
            sql = RESULTS_SQL.format(spans=" OR ".join(f"({SPAN_SQL})" for _ in spans))
            cursor.execute(sql + "".join(f" AND s.{name} = %s" for name in wanted),
                           [*itertools.chain.from_iterable(spans), *wanted.values()])
            return cursor.fetchall()
    return (Result.objects.of_spans(spans)
            .filter(**{f"series__{name}": value
                                           for name, value in wanted.items()})
            .exclude(value__isnull=True, string_values__isnull=True)
            .annotate(unit=KeyTextTransform("unit", "extra_info"),
                      unstable=KeyTextTransform("unstable", "extra_info"),
                      error=KeyTextTransform("error", "extra_info"))
            .values_list("series_id", "run_id", "value", "values", "string_values", "unit",
                         "unstable", "error", *[f"series__{name}" for name in FILTERS]))


def _bucket(rows: Iterable, runs: dict[int, tuple[str, datetime, str]], head_sha: str) -> _Found:
    """The results by (series, sha): numbers, pass/fail outcomes, cell statuses."""
    found = _Found()
    for series_id, run_id, value, values, strings, unit, shaky, error, *fields in rows:
        sha = runs[run_id][0]
        if value is None:  # a string result: a cell's status, or a pass/fail outcome
            if fields[-1] == STATUS_METRIC:
                found.statuses.setdefault((series_id, sha), []).append(
                    (text(strings), error or ""))
            else:
                found.outcomes.setdefault((series_id, sha), []).append(
                    (text(strings), passes(strings)))
            finite = [1.0]
        else:
            finite = [v for v in repetitions(values, value) if math.isfinite(v)]
            found.samples.setdefault((series_id, sha), []).extend(finite)
        if sha == head_sha and finite:
            found.head_runs_of.setdefault(series_id, set()).add(run_id)
        if shaky in (True, "true", "True"):
            found.unstable.add(series_id)
        found.run_ids.add(run_id)
        if series_id not in found.series:
            found.series[series_id] = _Series(series_id, *fields)
            found.units[series_id] = unit or ""
    return found


def _runs(used: set[int], runs: dict[int, tuple[str, datetime, str]], base_sha: str,
          head_sha: str) -> tuple[dict[int, tuple[datetime, str]], dict[int, datetime]]:
    """Of the runs with results (`used`), the base's (time, branch) and the head's (time)."""
    head_runs: dict[int, datetime] = {}
    base_runs: dict[int, tuple[datetime, str]] = {}
    for run_id in used:
        sha, at, branch = runs[run_id]
        if sha == head_sha and head_sha != base_sha:
            head_runs[run_id] = at
        if sha == base_sha:
            base_runs[run_id] = (at, branch)
    return base_runs, head_runs


def _tolerances(series: Iterable[_Series], settings: Settings) -> dict[tuple[str, str], float]:
    """Each (metric, benchmark)'s tolerance, asked once."""
    tolerances: dict[tuple[str, str], float] = {}
    for item in series:
        key = (item.metric, item.benchmark)
        if key not in tolerances:
            tolerances[key] = settings.tolerance(*key)
    return tolerances


def _judge(found: _Found, base_sha: str, head_sha: str, histories: dict[int, judge.Baseline],
           tolerances: dict[tuple[str, str], float], settings: Settings) -> list[_Judged]:
    """Each series' first verdict (before the false discovery rate): pass/fail series by
    their outcomes, cells by their statuses (both as `outcomes.DIRECTION` says), the others
    by their numbers against their history, in the direction `directions` gives."""
    directions = better_for(found.series.values(), found.units)
    pass_fail, cells = found.pass_fail, found.cells
    rules_of = {tolerance: Rules(tolerance=tolerance, min_history=settings.min_history,
                                 alpha=settings.compare_significance)
                for tolerance in set(tolerances.values())}
    judged = []
    for pk, item in found.series.items():
        runs = len(found.head_runs_of.get(pk, ()))
        if pk in pass_fail:
            was = found.outcomes.get((pk, base_sha), [])
            now = found.outcomes.get((pk, head_sha), [])
            judged.append(_Judged(item, judge.outcome(was, now), outcomes.DIRECTION,
                                  _passed(was), _passed(now), 0, runs))
        elif pk in cells:
            was = found.statuses.get((pk, base_sha), [])
            now = found.statuses.get((pk, head_sha), [])
            verdict = judge.cell_status(was, now)
            judged.append(_Judged(item, verdict, outcomes.DIRECTION,
                                  _ran(was, verdict.state == REGRESSION), _ran(now), 0, runs))
        else:
            rules = rules_of[tolerances[item.metric, item.benchmark]]
            base = found.samples.get((pk, base_sha), [])
            head = found.samples.get((pk, head_sha), [])
            history = histories.get(pk, judge.NO_HISTORY)
            verdict = judge.judge(base, head, history, directions[pk], rules,
                                  pk in found.unstable, runs)
            judged.append(_Judged(item, verdict, directions[pk], base, head,
                                  history.points, runs))
    return judged


def _passed(results: list[tuple[str, bool | None]]) -> list[float]:
    """A pass/fail side as a row shows it: 1 where every judged result passes, else 0 (as
    many values as results judged)."""
    judged = [passed for _, passed in results if passed is not None]
    return [float(all(judged))] * len(judged)


def _ran(statuses: list[tuple[str, str]], implied: bool = False) -> list[float]:
    """A cell's status side as a row shows it: 0 where it failed, 1 where it was skipped or
    (`implied`: a failure's base without a status) ran."""
    return [0.0 if status == FAILED else 1.0 for status, _ in statuses] or (
        [1.0] if implied else [])


def _baselines(series_ids: list[int], base_runs: dict[int, tuple[datetime, str]],
               head_runs: dict[int, datetime], branches: list[str], settings: Settings,
               changes: Changes) -> dict[int, judge.Baseline]:
    """Each series' baseline on the default branches up to the base commit (its runs'
    times and branches in `base_runs`): the one stored for the base's point where there is
    one, else computed from the history (the head's own runs left out, should the head be
    older)."""
    if not base_runs:
        return {}
    until = max(at for at, _ in base_runs.values())
    head_older = any(at <= until for at in head_runs.values())
    found = {} if head_older else stored_baselines.stored(
        series_ids, [run for run, (_, branch) in base_runs.items() if branch in branches])
    missing = [pk for pk in series_ids if pk not in found]
    histories = recent(missing, settings.lookback_points, branches, until)
    for pk, history in histories.items() if head_older else ():
        kept = [n for n, run in enumerate(history.run_ids) if run not in head_runs]
        histories[pk] = History([history.timestamps[n] for n in kept],
                                [history.run_ids[n] for n in kept], history.values[kept],
                                history.noise_floor, history.unit)
    computed = stored_baselines.of_histories(
        histories, changes(list(histories), branches, until), settings.lookback_points)
    return found | {pk: one for (pk, _), one in computed.items()}


class _Series(NamedTuple):
    """The fields of a series a comparison needs (model instances cost 20x more), in the
    order of a Row's first fields."""

    pk: int
    benchmark: str
    model: str
    backend: str
    mode: str
    dtype: str
    device: str
    arch: str
    metric: str


def _row(series: _Series, direction: str | None, tolerance: float, verdict: Verdict,
         base: list[float], head: list[float], points: int, head_runs: int) -> Row:
    base_value = median(base) if base else None
    head_value = median(head) if head else None
    change = None
    if base_value and head_value is not None:
        change = head_value / base_value - 1
    return Row(*series, direction=direction, tolerance=tolerance, base=base_value, head=head_value,
               base_count=len(base), head_count=len(head), change=change,
               level=verdict.level, noise=verdict.noise, history=points,
               p_value=verdict.p_value, mw_p_value=verdict.mw_p_value,
               adjusted_p=verdict.adjusted, head_runs=head_runs, state=verdict.state,
               held=verdict.held, rule=verdict.rule)
