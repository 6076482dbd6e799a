"""The long API fuzz run: Schemathesis over the OpenAPI schema, many cases per operation,
then generated specs and recipes, then oversized bodies.

    .venv/bin/python perf/api_fuzz.py [--examples 1000] [--spec-examples 2000] [--seed 18]

Needs PostgreSQL (default postgres@127.0.0.1:5432; --admin-url to change). It recreates the
database `benchsite_api_fuzz`, stores a few results and a token that may do everything, then
sends every operation of `/api/schema/` `--examples` generated cases in each generation mode
(valid and invalid parameters and bodies) through the WSGI app. It prints the requests sent
per operation and status, and every distinct 5xx with a curl command that reproduces
it. Then (perf/spec_fuzz.py) it posts `--spec-examples` generated job specs (YAML aliases and
bombs, nesting, `class` keys naming callables at any depth, paths that climb out; nothing is
queued) and prints their statuses, the slowest answer and any module a recipe named that got
imported; and it sends oversized and bad bodies to the upload and jobs endpoints, printing
each answer's status, time, size and this (the web) process's peak RSS rise, beside a small
valid upload measured in the same run. Exit 1 on a 5xx, an import or an answer over 5 s to
a bomb or an oversized body. tests/results/test_api_fuzz.py is the bounded run CI does.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB = "benchsite_api_fuzz"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000,
                        help="cases per operation and generation mode")
    parser.add_argument("--spec-examples", type=int, default=2000,
                        help="generated job specs and recipes")
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()

    with psycopg.connect(args.admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")
    # Rate limits off: past them every case would be the same 429.
    os.environ.update(DATABASE_URL=args.admin_url.rsplit("/", 1)[0] + f"/{DB}",
                      DJANGO_SETTINGS_MODULE="benchsite.settings", BENCH_THROTTLE_TOKEN="",
                      BENCH_THROTTLE_ANON="")
    os.environ.pop("CELERY_BROKER_URL", None)  # detection runs inline, as in the tests

    import logging

    import django

    django.setup()
    logging.disable(logging.WARNING)  # a 4xx per case; server errors still print
    from django.conf import settings as site_settings
    from django.core.management import call_command
    from hypothesis import HealthCheck, given, seed, settings
    from schemathesis import GenerationMode, openapi

    from benchsite.results.ingest import store_upload
    from benchsite.results.models import UploadToken
    from benchsite.wsgi import application
    from tests.results.samples import META, TORCHAO, VLLM, record

    call_command("migrate", verbosity=0)
    store_upload(json.dumps([
        record(TORCHAO, **META),
        record(VLLM, **{**META, "head_sha": "b" * 40}, model={"name": "=HYPERLINK(1)"}),
    ]).encode())
    token = UploadToken(name="fuzz", repos=["pytorch/ao", "vllm-project/*"],
                        scopes=list(UploadToken.Scope.values),
                        queues=list(site_settings.BENCH_QUEUES))
    secret = token.issue()
    token.save()
    auth = {"Authorization": f"Bearer {secret}"}

    schema = openapi.from_wsgi("/api/schema/?format=json", application)
    sent: dict[str, collections.Counter] = {}
    errors: dict[tuple[str, int], str] = {}

    def fuzz(strategy, name: str, counts: collections.Counter) -> None:
        @seed(args.seed)
        @settings(max_examples=args.examples, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=strategy)
        def send(case):
            response = case.call(headers=auth)
            counts[response.status_code] += 1
            if response.status_code >= 500:
                errors.setdefault((name, response.status_code), case.as_curl_command(auth))

        send()
    started = time.perf_counter()
    for result in schema.get_all_operations():
        operation = result.ok()
        name = f"{operation.method.upper()} {operation.path}"
        counts = sent.setdefault(name, collections.Counter())
        for mode in GenerationMode:
            fuzz(operation.as_strategy(generation_mode=mode), name, counts)
    seconds = time.perf_counter() - started

    total = sum(sum(counts.values()) for counts in sent.values())
    print(f"api fuzz: {total} requests to {len(sent)} operations in {seconds:.0f} s "
          f"(seed {args.seed}, up to {args.examples} cases per operation and mode)")
    for name, counts in sent.items():
        statuses = ", ".join(f"{key} {value}" for key, value in sorted(counts.items()))
        print(f"  {name:<34} {sum(counts.values()):>6}  {statuses}")
    server_errors = sum(count for counts in sent.values()
                        for status, count in counts.items() if status >= 500)
    print(f"5xx found: {server_errors} ({len(errors)} distinct operation and status)")
    for (name, status), curl in errors.items():
        print(f"  {status} {name}: {curl}")
    return max(1 if errors else 0, fuzz_bodies(args, auth, TORCHAO, META, record))


def fuzz_bodies(args: argparse.Namespace, auth: dict[str, str], *samples) -> int:
    """The spec and recipe fuzz and the oversized bodies (perf/spec_fuzz.py); 1 on a failure."""
    from django.conf import settings as site_settings
    from django.test import Client

    from benchsite.jobs import submit
    from perf.spec_fuzz import fuzz_specs, oversized

    submit.enqueue = lambda job: None  # nothing runs: the jobs stay pending
    client = Client(HTTP_AUTHORIZATION=auth["Authorization"], HTTP_HOST="localhost")
    started = time.perf_counter()
    found = fuzz_specs(client, {}, args.spec_examples, args.seed)
    statuses = ", ".join(f"{key} {value}" for key, value in sorted(found["counts"].items()))
    print(f"spec fuzz: {sum(found['counts'].values())} specs to POST /api/v3/jobs in "
          f"{time.perf_counter() - started:.0f} s: {statuses}; slowest answer "
          f"{found['slowest_s']:.2f} s; modules a recipe named that got imported: "
          f"{found['imported'] or 'none'}")
    for status, text in found["errors"].items():
        print(f"  {status}: {text!r}")
    base, meta, record = samples
    rows = oversized(client, {}, site_settings.BENCH_UPLOAD_MAX_BYTES, record(base, **meta))
    print(f"oversized bodies (upload limit {site_settings.BENCH_UPLOAD_MAX_BYTES:,} bytes):")
    print(f"  {'body':<40} {'bytes':>12} {'status':>6} {'seconds':>8} {'peak RSS +MB':>12} "
          f"{'answer bytes':>12}")
    for what, status, seconds, rss, size, answer in rows:
        print(f"  {what:<40} {size:>12,} {status:>6} {seconds:>8.2f} {rss:>12.1f} "
              f"{answer:>12,}")
    slow = [row for row in rows[1:] if row[2] > 5 or row[1] >= 500]
    return 1 if found["errors"] or found["imported"] or slow else 0


if __name__ == "__main__":
    sys.exit(main())
