"""Server time of every dashboard page and its JSON endpoint on a large database.

    .venv/bin/python manage.py seed_history          # once: ~10 million results
    .venv/bin/python manage.py baselines             # only for a database seeded before
                                                     # seed_history stored them
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/DB \
        .venv/bin/python perf/dashboard_latency.py

Each page is requested with several filter combinations (devices, commits, time ranges,
granularities), each combination --repeat times after a warm-up, in-process through
Django's test client: the time is the server's, without the network. Prints p50/p95 per
page and per JSON endpoint, the SQL queries per request, and the size of the database.
Target: p95 under 200 ms per page. --only NAME,NAME measures only those pages; --cold
requests only each page's first URL, once (what a user's first click after a server start
costs when the process is fresh: `perf/growth.py` runs it once per page); --json PATH also
writes the rows as JSON.

Regressions: the alert groups list (`/regressions/`, with its triage precision over the
default window and a year), the latest groups' pages, the compare
page and `GET /api/v3/compare` over the latest groups' commit ranges (where series are in
the regression, improvement, noisy... states; the states counted are printed) as well as
over consecutive and distant commits, and the nightly reports (`/regressions/reports/`, the
latest reports' pages, their JSON and markdown). Where no nightly report is stored (the
seeded history has none), the reports of the newest run's day are built first, without
notifying, and that build is timed. A URL that does not answer 200 is reported (status and
the start of its body) and the others are still measured; the exit status is then 1.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner.contract.names import (  # noqa: E402
    COMPILERS_BENCHMARK,
    INSTRUCTIONS_BENCHMARK,
    KERNELS_BENCHMARK,
    QUANT_BENCHMARK,
    QuantMetric,
)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _span(counts: set[int]) -> str:
    return "-".join(map(str, sorted({min(counts), max(counts)})))


def page_urls() -> dict[str, list[str]]:
    from urllib.parse import urlencode

    from benchsite.results.models import RunSummary
    from dashboards.pages.common import latest_shas

    def url(path, **params):
        return f"{path}?{urlencode(params)}" if params else path

    quant = QUANT_BENCHMARK
    shas = [sha for sha, _ in latest_shas("pytorch/ao", quant, "main")]
    archs = sorted(set(RunSummary.objects.filter(repo="pytorch/ao", benchmark=quant)
                       .values_list("arch", flat=True).distinct()))
    pages = {"home": [url("/")]}
    pages["quantization"] = [
        url("/quantization/", arch=arch, compile_mode=mode, **extra)
        for arch in archs for mode in ("max-autotune", "none")
        for extra in ({}, {"base": shas[min(30, len(shas) - 1)]},
                      {"sha": shas[len(shas) // 2], "base": shas[-1]})
    ]
    pages["trends"] = [
        url("/trends/", repo=repo, range=window, granularity=granularity, **extra)
        for repo in ("pytorch/ao", "pytorch/pytorch", "vllm-project/vllm")
        for window, granularity in (("7d", "hour"), ("30d", "day"), ("365d", "day"),
                                    ("365d", "week"))
        for extra in ({}, {"arch": "NVIDIA H100 80GB HBM3"})
    ]
    pages["explorer"] = [
        url("/explorer/"), url("/explorer/", range="365d"),
        url("/explorer/", repo="pytorch/ao", model="int8dq-4096-4096-8192", range="365d"),
        url("/explorer/", repo="pytorch/pytorch", metric="speedup", suite="huggingface",
            mode="training", backend="inductor", range="90d"),
        url("/explorer/", repo="vllm-project/vllm", metric="median_itl_ms", range="365d"),
    ]
    pages["compare"] = [
        url(f"/compare/{shas[n]}...{shas[0]}", repo="pytorch/ao", **extra)
        for n in sorted({min(1, len(shas) - 1), min(30, len(shas) - 1), len(shas) - 1})
        for extra in ({}, {"metric": QuantMetric.SPEEDUP, "arch": "NVIDIA H100 80GB HBM3"})
    ]
    inductor = [sha for sha, _ in latest_shas("pytorch/pytorch", COMPILERS_BENCHMARK, "main")]
    pages["compare"] += [url(f"/compare/{inductor[n]}...{inductor[0]}", repo="pytorch/pytorch")
                         for n in sorted({min(1, len(inductor) - 1),
                                          min(30, len(inductor) - 1)})]
    pages["compilers"] = [
        url("/compilers/", **extra)
        for extra in ({}, {"mode": "training"}, {"base": inductor[min(30, len(inductor) - 1)]})
    ] + [url("/compilers/models/", backend="inductor", suite=suite)
         for suite in ("huggingface", "torchbench")]
    kernels = [sha for sha, _ in latest_shas("pytorch/pytorch", KERNELS_BENCHMARK, "main")]
    pages["kernels"] = [url("/kernels/", repo="pytorch/pytorch", **extra)
                        for extra in ({}, {"sha": kernels[-1]}, {"dtype": "bfloat16"})]
    counts = [sha for sha, _ in latest_shas("pytorch/pytorch", INSTRUCTIONS_BENCHMARK, "main")]
    pages["instructions"] = [
        url("/instructions/", repo="pytorch/pytorch", **extra)
        for extra in ({}, {"base": counts[min(30, len(counts) - 1)]}, {"sort": "name"})
    ]
    pages["recipes"] = [url("/recipes/")]
    pages["regressions"] = [url("/regressions/"), url("/regressions/", state="open"),
                            url("/regressions/", days="365")]  # a year's triage precision
    from benchsite.regressions.models import AlertGroup, NightlyReport, Regression

    latest = Regression.objects.order_by("-pk").values_list("pk", flat=True)[:5]
    pages["regression chart"] = [f"/regressions/{pk}/" for pk in latest]
    groups = [group for group in AlertGroup.objects.order_by("-first_bad_at", "-pk")[:20]
              if group.last_good_sha][:3]
    pages["alert group"] = [f"/regressions/groups/{group.pk}/" for group in groups]
    ranges = [(group.repo, group.last_good_sha, group.first_bad_sha) for group in groups]
    pages["compare groups"] = [url(f"/compare/{base}...{head}", repo=repo)
                               for repo, base, head in ranges]
    consecutive = [("pytorch/ao", shas[n], shas[0])
                   for n in sorted({min(1, len(shas) - 1), min(30, len(shas) - 1)})]
    consecutive.append(("pytorch/pytorch", inductor[min(1, len(inductor) - 1)], inductor[0]))
    pages["compare API"] = [url("/api/v3/compare", repo=repo, base=base, head=head)
                            for repo, base, head in ranges + consecutive]
    pages["reports"] = [url("/regressions/reports/")]
    reports = NightlyReport.objects.order_by("-day", "pk").values_list("pk", flat=True)[:3]
    pages["report"] = [f"/regressions/reports/{pk}/" for pk in reports]
    pages["run"] = [f"/runs/{pk}/" for pk in run_samples()]
    return {name: urls for name, urls in pages.items() if urls}


def run_samples() -> list[int]:
    """Runs whose pages are timed: the newest three, and the three largest of the newest
    night and of the night 30 days before it (another month's partition). The same nightly
    jobs at every size of a seeded history, so `perf/growth.py` times the same kinds of
    runs at 1M as at 10M (the 1,000th newest runs it took before did not exist at 1M)."""
    from datetime import timedelta

    from benchsite.results.models import Run

    runs = Run.objects.order_by("-timestamp")
    newest = runs.values_list("timestamp", flat=True).first()
    if newest is None:
        return []
    picked = list(runs.values_list("pk", flat=True)[:3])
    for days in (0, 30):
        night = newest - timedelta(days=days)
        picked += [pk for pk in runs.filter(timestamp__gt=night - timedelta(days=1),
                                            timestamp__lte=night)
                   .order_by("-result_count", "-timestamp").values_list("pk", flat=True)[:3]
                   if pk not in picked]
    return picked


# The variants of each page: (label, query added); the pages answer ?format=json, the API
# is JSON already (and refuses unknown parameters).
PAGE_VARIANTS = (("", ""), (" JSON", "format=json"))
VARIANTS = {"compare API": (("", ""),),
            "report": PAGE_VARIANTS + ((" markdown", "format=markdown"),)}


def ensure_reports() -> str:
    """Build the nightly reports of the newest run's day where none is stored (without
    notifying): what that took, or why nothing was built."""
    from datetime import UTC

    from benchsite.regressions.models import NightlyReport
    from benchsite.regressions.report import nightly_reports
    from benchsite.results.models import Run

    if NightlyReport.objects.exists():
        return f"{NightlyReport.objects.count()} nightly reports stored"
    newest = Run.objects.order_by("-timestamp").values_list("timestamp", flat=True).first()
    if newest is None:
        return "no runs: no nightly report"
    started = time.perf_counter()
    built = nightly_reports(newest.astimezone(UTC).date(), send=False)
    return (f"no nightly report was stored: built the {len(built)} of "
            f"{newest.astimezone(UTC).date()} in {time.perf_counter() - started:.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", help="comma-separated page names (as printed) to measure")
    parser.add_argument("--cold", action="store_true",
                        help="only each page's first URL, once, without repeats")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    os.environ["DEBUG"] = "false"
    os.environ.setdefault("SECRET_KEY", "latency-benchmark")
    # Set up as a served process is (benchsite.wsgi, as gunicorn --preload imports it before
    # it forks its workers): the URLconf and its views imported, start-up objects frozen.
    importlib.import_module("benchsite.wsgi")
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from benchsite.regressions.models import AlertGroup, Regression
    from benchsite.results.models import Result, Run, Series

    call_command("collectstatic", "--no-input", verbosity=0)  # DEBUG is off, as in production
    print(f"database: {Result.objects.count():,} results, {Series.objects.count():,} series, "
          f"{Run.objects.count():,} runs, {Regression.objects.count():,} regressions in "
          f"{AlertGroup.objects.count():,} groups")
    print(ensure_reports())
    client = Client()
    # A served process loads its middleware when the WSGI application is made, before any
    # request (benchsite.wsgi); the test client would on its first request.
    client.handler.load_middleware()
    print(f"{'page':<22} {'urls':>4} {'requests':>8} {'p50 ms':>8} {'p95 ms':>8} "
          f"{'max ms':>8} {'queries':>8} {'max first request ms':>8}")
    worst = 0.0
    failed: list[str] = []
    states: Counter[str] = Counter()
    rows: list[dict] = []
    for name, urls in page_urls().items():
        if only is not None and name not in only:
            continue
        if args.cold:
            urls = urls[:1]
        for variant, suffix in VARIANTS.get(name, PAGE_VARIANTS)[:1 if args.cold else None]:
            times, queries, cold = [], set(), []
            for url in urls:
                full = url + (("&" if "?" in url else "?") + suffix if suffix else "")
                started = time.perf_counter()
                response = client.get(full)  # the first request: nothing cached yet
                cold.append(1000 * (time.perf_counter() - started))
                if response.status_code != 200:
                    failed.append(f"{full}: {response.status_code} {response.content[:300]!r}")
                    continue
                if name == "compare API":
                    states.update(response.json()["counts"])
                for _ in range(0 if args.cold else args.repeat):
                    with CaptureQueriesContext(connection) as captured:
                        started = time.perf_counter()
                        client.get(full)
                        times.append(1000 * (time.perf_counter() - started))
                    queries.add(len(captured.captured_queries))
            if not times and not args.cold:  # its first request failed
                print(f"{name + variant:<22} {len(urls):>4} {'failed':>8}")
                continue
            rows.append({"page": name + variant, "first_ms": max(cold),
                         "p50_ms": statistics.median(times) if times else None,
                         "p95_ms": percentile(times, 0.95) if times else None})
            if args.cold:
                print(f"{name + variant:<22} {len(urls):>4} {'':>8} {'':>8} {'':>8} {'':>8} "
                      f"{'':>8} {max(cold):>8.1f}")
                continue
            worst = max(worst, percentile(times, 0.95))
            print(f"{name + variant:<22} {len(urls):>4} {len(times):>8} "
                  f"{statistics.median(times):>8.1f} {percentile(times, 0.95):>8.1f} "
                  f"{max(times):>8.1f} {_span(queries):>8} {max(cold):>8.1f}")
    if args.cold:
        print(f"worst first request: {max(row['first_ms'] for row in rows):.1f} ms "
              "(target: under 1,000 ms)")
    else:
        print(f"worst p95: {worst:.1f} ms (target: under 200 ms)")
    if states:
        print("states of the series compared by the compare API: "
              + ", ".join(f"{state} {count:,}" for state, count in states.items() if count))
    for failure in failed:
        print(f"FAILED {failure}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
