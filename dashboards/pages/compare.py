"""Commit comparison page (`/compare/BASE...HEAD?repo=R`): what changed between two commits.
The series table lists changes first (regressions, improvements, then the rest by state),
the largest first within a state, a page at a time."""

from __future__ import annotations

from collections import defaultdict

from django.http import Http404, HttpRequest, HttpResponseRedirect
from django.urls import reverse

from benchsite.caching import ProcessCache
from benchsite.comparison.compare import CannotCompare, Comparison
from benchsite.comparison.environments import DIFFERS, SAME
from benchsite.comparison.judge import (
    IMPROVEMENT,
    MAX_FDR,
    NOISY,
    REGRESSION,
    STATES,
    check_fdr,
)
from benchsite.gc_pause import gc_paused
from benchsite.regressions.comparisons import recent_comparison
from benchsite.regressions.models import DetectionSettings
from benchsite.results.models import Run, RunSummary
from dashboards import charts
from dashboards.choices import repos_and_benchmarks
from dashboards.filters import prefer, short_sha
from dashboards.pages.common import (
    geomean,
    page_url,
)
from dashboards.pages.runs import links
from dashboards.paging import paged
from dashboards.render import Page, Table
from dashboards.state import State

CLASSES = {REGRESSION: "worse", IMPROVEMENT: "better", NOISY: "noise"}
TOP = 20
# Tables and charts of recent comparisons, by (comparison, filters); see `_views`.
VIEWS = ProcessCache(maxsize=8, ttl=600)  # (each holds its comparison: memory)


def build(state: State, base: str, head: str) -> Page:
    repos, _ = repos_and_benchmarks()
    repo = state.choice("repo", repos, default="pytorch/ao")
    try:
        comparison = recent_comparison(repo, base, head, fdr=_fdr(state))
    except CannotCompare as error:
        raise Http404(str(error)) from None
    base, head = comparison.base_sha, comparison.head_sha
    runs = {sha: list(Run.objects.of_commit(repo, sha).order_by("timestamp"))
            for sha in (base, head)}
    options = {name: sorted({getattr(row, name) for row in comparison.rows})
               for name in ("benchmark", "metric", "arch")}
    chosen = {name: state.choice(name, ["", *options[name]], default="") for name in options}
    status = state.choice("status", ["", *STATES], default="")
    summary, listed, figures = _views(comparison, chosen, status, repo)
    shown, paging = paged(state, listed)
    series = _details(shown, repo, links=not state.csv)
    series.paging = paging
    environment = [entry for entry in comparison.environment
                   if not chosen["arch"] or entry.arch == chosen["arch"]]
    return Page(
        title=f"Compare {short_sha(base)}...{short_sha(head)}",
        filters={"repo": repo, "base": base, "head": head, **chosen, "status": status,
                 "verdict": comparison.verdict, "counts": comparison.counts,
                 "branches": comparison.branches, "fdr": comparison.fdr,
                 **paging.as_filters()},
        tables=[summary, series],
        figures=figures,
        context={"comparison": comparison, "fdr": f"{comparison.fdr:.2%}".replace(".00%", "%"),
                 "fdr_param": state.values.get("fdr", ""), "runs": runs, "options": options,
                 "chosen": chosen, "statuses": STATES, "status": status, "repos": repos,
                 **_environment(environment),
                 "base_links": [links(run) for run in runs[base]][:1],
                 "head_links": [links(run) for run in runs[head]][:1]},
    )


def _environment(entries: list) -> dict:
    """The devices (and jobs) whose environment differs, or is not known, between the
    base's and the head's runs (the page's "Environment" table), and whether every device
    both ran on has the same one (a line instead)."""
    differ = [entry for entry in entries if entry.state in DIFFERS]
    same = not differ and any(entry.state == SAME for entry in entries)
    return {"environment": differ, "environment_same": same}


def _fdr(state: State) -> float | None:
    """The false discovery rate the URL names (the gate's link names the one it judged
    with); None: the detection settings'."""
    raw = state.query.get("fdr", "").strip()
    if not raw:
        return None
    try:
        fdr = check_fdr(float(raw))
    except ValueError:
        return state.fallback(
            "fdr", f"a false discovery rate, above 0 and at most {MAX_FDR:g}; got {raw!r}",
            None, f"fdr: {raw!r} is not a false discovery rate (above 0, at most "
            f"{MAX_FDR:g}); showing the detection settings' rate.")
    state.values["fdr"] = f"{fdr:g}"
    return fdr


def latest(request: HttpRequest) -> HttpResponseRedirect:
    """`/compare/` (`?repo=R`, other parameters passed on): the newest commit of the repo's
    default branch (pytorch/ao's, else the first repo's) against the newest one before it
    that measured something in common with it, the usual morning question. (A CI upload of
    another benchmark in between is skipped over, not compared into "no common results".)"""
    repos, _ = repos_and_benchmarks()
    repo = request.GET.get("repo") or prefer(repos, "pytorch/ao")
    if repo not in repos:
        raise Http404(f"repo {repo!r}: no results stored; known: {', '.join(repos) or 'none'}")
    branches = DetectionSettings.load().branches_for(repo)
    pair = _newest_pair(repo, branches)
    if pair is None:
        raise Http404(f"repo {repo!r}: no two commits on its default branch "
                      f"({', '.join(branches)}) with results in common to compare yet")
    base, head = pair
    params = request.GET.copy()  # ?format=json and the filters go along
    params["repo"] = repo
    return HttpResponseRedirect(reverse("dashboards:compare", kwargs={"base": base, "head": head})
                                + "?" + params.urlencode())


LATEST_RUNS = 200  # the newest runs of a default branch that `/compare/` picks its pair from


def _newest_pair(repo: str, branches: list[str]) -> tuple[str, str] | None:
    """(base, head): the newest commit with an older one that measured a slice it measured
    (benchmark, device, metric: the runs' summaries), that older one the newest such."""
    runs = list(Run.objects.filter(repo=repo, head_branch__in=branches)
                .order_by("-timestamp").values_list("pk", "head_sha")[:LATEST_RUNS])
    commits = list(dict.fromkeys(sha for _, sha in runs))  # newest first
    sha_of = dict(runs)
    slices: dict[str, set[tuple]] = defaultdict(set)
    for run, *slice_ in (RunSummary.objects.filter(run_id__in=sha_of)
                         .values_list("run_id", "benchmark", "device", "arch", "metric")):
        slices[sha_of[run]].add(tuple(slice_))
    for index, head in enumerate(commits):
        for base in commits[index + 1:]:
            if slices[head] & slices[base]:
                return base, head
    return None


def _views(comparison: Comparison, chosen: dict[str, str], status: str,
           repo: str) -> tuple[Table, list, list[dict]]:
    """The summary table, the listed rows (changes first) and the chart of a comparison
    narrowed by the page's filters, kept with the comparison they came from: building them
    for 18,000 series took most of a request."""
    key = (id(comparison), tuple(sorted(chosen.items())), status)
    found = VIEWS.get(key)
    if found is not None and found[0] is comparison:
        return found[1:]
    with gc_paused():
        rows = [row for row in comparison.rows if all(
            not value or getattr(row, name) == value for name, value in chosen.items())]
        # (comparison.rows come in this order already: changes first, the largest first)
        listed = [r for r in rows if not status or r.state == status]
        summary = _groups(rows, repo, comparison.base_sha, comparison.head_sha)
        figures = [_top_changes(rows)] if any(r.change is not None for r in rows) else []
    VIEWS.put(key, (comparison, summary, listed, figures))
    return summary, listed, figures


def _groups(rows, repo, base, head) -> Table:
    """Per benchmark, metric and device: counts by state, and the geomean of head/base over
    the series both commits have (with how many)."""
    groups: dict[tuple, list] = defaultdict(list)
    for row in rows:
        groups[(row.benchmark, row.metric, row.arch or row.device)].append(row)
    table = Table("summary", ["benchmark", "metric", "device", "geomean head/base", "common",
                              *STATES], [])
    for (benchmark, metric, device), members in sorted(groups.items()):
        both = [row.head / row.base for row in members
                if row.base and row.head is not None and row.base > 0]
        counts = {status: sum(1 for row in members if row.state == status)
                  for status in STATES}
        table.rows.append([benchmark, metric, device, geomean(both), len(both),
                           *counts.values()])
        drill = {"repo": repo, "benchmark": benchmark, "metric": metric}
        table.links.append({
            status: page_url("dashboards:compare", base, head, **drill, status=status)
            for status in STATES if counts[status]
        } | {"benchmark": page_url("dashboards:compare", base, head, **drill)})
        numbers = dict.fromkeys(["geomean head/base", "common", *STATES], "nowrap")
        table.classes.append(numbers | {
            REGRESSION: "worse nowrap" if counts[REGRESSION] else "nowrap",
            IMPROVEMENT: "better nowrap" if counts[IMPROVEMENT] else "nowrap"})
    return table


def _details(rows, repo: str, links: bool) -> Table:
    """The rows shown, linked to their series in the explorer (not for a CSV: 18,000 links
    cost more than the rest of it)."""
    explorer = reverse("dashboards:explorer")
    table = Table("series", ["model", "device", "metric", "change %", "vs level %", "noise %",
                             "state", "base", "head", "level", "benchmark", "backend", "mode",
                             "dtype", "why"],
                  [], fold_when_same=("device", "metric", "benchmark", "backend", "mode",
                                      "dtype"), detail="why")
    for row in rows:
        table.rows.append([row.model, row.arch or row.device, row.metric,
                           _percent(row.change),
                           _percent(_against_level(row)),
                           None if row.noise is None else round(100 * row.noise, 2),
                           row.state.replace("_", " "), row.base, row.head, row.level,
                           row.benchmark, row.backend, row.mode, row.dtype, row.rule])
        if links:
            table.links.append({"model": page_url(
                explorer, repo=repo, benchmark=row.benchmark, model=row.model,
                metric=row.metric, arch=row.arch, range="90d")})
            state = CLASSES.get(row.state, "")
            table.classes.append({"model": "nowrap", "device": "nowrap", "metric": "nowrap",
                                  "dtype": "nowrap", "change %": "nowrap",
                                  "vs level %": f"{state} nowrap", "noise %": "nowrap",
                                  "state": f"{state} nowrap", "base": "nowrap",
                                  "head": "nowrap", "level": "nowrap"})
    return table


def _against_level(row) -> float | None:
    """The head against the level its state is judged by (the history's median up to the
    base), where "change %" is the head against the base commit alone."""
    if row.head is None or not row.level:
        return None
    return row.head / row.level - 1


def _percent(fraction: float | None) -> float | None:
    return None if fraction is None else round(100 * fraction, 2)


def _top_changes(rows) -> dict:
    changed = sorted((r for r in rows if r.change is not None),
                     key=lambda r: -abs(r.change))[:TOP]
    colours = [charts.RED if r.state == REGRESSION else charts.GREEN
               if r.state == IMPROVEMENT else charts.GREY for r in changed]
    labels = [charts.esc(f"{r.model} · {r.metric} · {r.arch or r.device}") for r in changed]
    figure = {"data": [{"type": "bar", "orientation": "h", "y": labels,
                        "x": [round(100 * r.change, 2) for r in changed],
                        "marker": {"color": colours},
                        "hovertemplate": "%{y}: %{x:.2f}%<extra></extra>"}],
              "layout": charts.layout(f"Largest changes (top {len(changed)})",
                                      xaxis={"title": {"text": "change (%)"}},
                                      yaxis={"automargin": True, "autorange": "reversed"},
                                      height=max(240, 20 * len(changed) + 80))}
    return figure
