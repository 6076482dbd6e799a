"""Upload client for CI: `python -m runner upload FILE... --server URL --token T`.

Plain HTTP (urllib), no Django. A file is sent as it is (JSON list, one object or JSON Lines,
the server accepts all three), gzip-compressed, with the run metadata it lacks passed as
query parameters. Every request carries an Idempotency-Key derived from its content, so a
retry after a timeout can never store results twice. A broken transfer (connection reset,
a response cut short, a timeout) and 429/5xx answers are retried with exponential backoff
(429 and 503 honour Retry-After); one file that fails never stops the others. While one file
is sent, the next is read, keyed and compressed on another thread.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from isal import igzip

from runner.contract.record import REQUIRED_RUN_FIELDS, RUN_FIELDS
from runner.contract.repos import repo_problem

T = TypeVar("T")
RETRYABLE_STATUS = {429, 500, 502, 503, 504}
MAX_RETRY_AFTER = 300.0  # seconds: a longer Retry-After is cut to this
# A transfer that broke: refused or reset connections, a response cut short
# (http.client.IncompleteRead), timeouts; a 2xx answer that is not the upload's JSON (cut
# short, or a proxy's page).
BROKEN_TRANSFER = (urllib.error.URLError, http.client.HTTPException, ConnectionError,
                   TimeoutError, json.JSONDecodeError, KeyError)


class UploadError(Exception):
    """The server refused an upload, or could not be reached after every retry."""


@dataclass(frozen=True)
class UploadResult:
    upload_id: int
    records: int
    created: bool  # False when the server recognised a repeat of an earlier upload


def ci_metadata(env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Run metadata from a GitHub Actions environment; empty outside CI."""
    ref_name = env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME")
    found = {
        "repo": env.get("GITHUB_REPOSITORY"),
        "head_sha": env.get("GITHUB_SHA"),
        "head_branch": ref_name,
        "workflow_id": env.get("GITHUB_RUN_ID"),
        "run_attempt": env.get("GITHUB_RUN_ATTEMPT"),
        "job_id": env.get("GITHUB_JOB_ID"),
        "name": env.get("GITHUB_WORKFLOW"),
    }
    return {key: value for key, value in found.items() if value}


@dataclass(frozen=True)
class Prepared:
    """A payload ready to send: its URL (the metadata as query parameters), gzip body and
    headers (the Idempotency-Key derived from the content)."""

    url: str
    metadata: dict[str, str]
    compressed: bytes
    headers: dict[str, str]


def prepare(body: bytes, server: str, token: str,
            metadata: Mapping[str, object] | None = None) -> Prepared:
    """`body` keyed and compressed for `{server}/api/v3/results`, `metadata` in its query."""
    params = {k: str(v) for k, v in (metadata or {}).items() if v is not None and v != ""}
    query = urllib.parse.urlencode(sorted(params.items()))
    url = server.rstrip("/") + "/api/v3/results" + (f"?{query}" if query else "")
    key = hashlib.sha256(query.encode() + b"\n" + body).hexdigest()
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Content-Encoding": "gzip",
        "Idempotency-Key": key,
    }
    return Prepared(url, params, igzip.compress(body, compresslevel=1), headers)


def send(prepared: Prepared, *, retries: int = 4, timeout: float = 120.0,
         backoff: float = 1.0) -> UploadResult:
    """POST a prepared payload to the server, retrying transient failures."""
    url = prepared.url
    last_problem = ""
    wait = 0.0
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(max(wait, backoff * 2 ** (attempt - 1)))
        wait = 0.0
        request = urllib.request.Request(url, data=prepared.compressed,
                                         headers=prepared.headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                answer = json.loads(response.read())
                return UploadResult(
                    upload_id=answer["upload_id"],
                    records=answer["records"],
                    created=response.status == 201,
                )
        except urllib.error.HTTPError as error:
            try:
                detail = error.read().decode("utf-8", "replace")
            except (http.client.HTTPException, OSError):
                detail = "(the error's body was cut short)"
            if error.code not in RETRYABLE_STATUS:
                raise UploadError(f"{url}: HTTP {error.code}: {detail}") from None
            last_problem = f"HTTP {error.code}: {detail}"
            wait = retry_after(error.headers.get("Retry-After"))
        except BROKEN_TRANSFER as error:
            last_problem = f"{type(error).__name__}: {getattr(error, 'reason', error)}"
    raise UploadError(f"{url}: gave up after {retries + 1} attempts: {last_problem}")


def upload_bytes(body: bytes, server: str, token: str,
                 metadata: Mapping[str, object] | None = None, **options) -> UploadResult:
    """POST one payload to `{server}/api/v3/results` (`options`: those of `send`)."""
    return send(prepare(body, server, token, metadata), **options)


def prepared_ahead(items: Sequence[T], make: Callable[[T], Prepared]
                   ) -> Iterator[tuple[T, Callable[[], Prepared]]]:
    """Each item with a call that gives `make(item)` (or raises what it raised), the next
    item's made on another thread while the caller sends this one: a client's key and gzip
    (hashlib and ISA-L let go of the GIL) then cost its uploads no time after the first."""
    with ThreadPoolExecutor(1, thread_name_prefix="upload-prepare") as pool:
        ahead = pool.submit(make, items[0]) if items else None
        for position, item in enumerate(items):
            made = ahead
            ahead = (pool.submit(make, items[position + 1]) if position + 1 < len(items)
                     else None)
            yield item, made.result


def retry_after(value: str | None) -> float:
    """Seconds a Retry-After header asks to wait (its number-of-seconds form); 0 if none."""
    try:
        return min(max(float(value), 0.0), MAX_RETRY_AFTER) if value else 0.0
    except ValueError:
        return 0.0


def upload_records(
    records: list[dict], server: str, token: str, metadata: Mapping[str, object] | None = None
) -> UploadResult:
    """Upload records held in memory (the runner's `--upload`)."""
    # NaN and Infinity go out as bare tokens, which the server accepts like Python writes them.
    body = json.dumps(records, separators=(",", ":")).encode()
    return upload_bytes(body, server, token, {**ci_metadata(), **(metadata or {})})


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "upload",
        help="upload OSS benchmark records to a results server",
        description=(
            "Upload files of PyTorch OSS benchmark records (a JSON list, one JSON object, or "
            "JSON Lines). Run metadata missing from the records is taken from the options, "
            "then from the GitHub Actions environment."
        ),
    )
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE")
    parser.add_argument("--server", required=True, help="base URL, e.g. https://bench.example")
    parser.add_argument(
        "--token", default=os.environ.get("BENCH_UPLOAD_TOKEN"), help="upload token "
        "(default: $BENCH_UPLOAD_TOKEN)"
    )
    for field in RUN_FIELDS:
        parser.add_argument(f"--{field.replace('_', '-')}", dest=field, metavar="VALUE")
    parser.add_argument("--retries", type=int, default=4,
                        help="retries of a broken transfer or a 429/5xx answer (default 4)")
    parser.add_argument("--backoff", type=float, default=1.0, metavar="SECONDS",
                        help="first wait between retries, doubled each time (default 1)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.token:
        print("error: --token or $BENCH_UPLOAD_TOKEN is required", file=sys.stderr)
        return 2
    given = {field: getattr(args, field) for field in RUN_FIELDS}
    metadata = {**ci_metadata(), **{k: v for k, v in given.items() if v}}
    lacking = missing_metadata(args.files, metadata)
    if lacking:
        print(f"error: nothing sent: {lacking}", file=sys.stderr)
        return 2
    if metadata.get("repo") and (problem := repo_problem(metadata["repo"])):
        where = "--repo" if given["repo"] else "GITHUB_REPOSITORY"
        print(f"error: nothing sent: {where}: {problem}", file=sys.stderr)
        return 2
    failed: list[Path] = []
    for path, prepared in prepared_ahead(
            args.files, lambda path: prepare(path.read_bytes(), args.server, args.token,
                                             metadata)):
        try:
            result = send(prepared(), retries=args.retries, backoff=args.backoff)
        except (OSError, UploadError) as error:
            print(f"{path}: {error}", file=sys.stderr)
            failed.append(path)
            continue
        state = "stored" if result.created else "already stored"
        print(f"{path}: {state} as upload {result.upload_id} ({result.records} records)")
    if failed:
        print(f"{len(failed)} of {len(args.files)} files not uploaded: "
              + ", ".join(str(path) for path in failed), file=sys.stderr)
        return 1
    return 0


def missing_metadata(files: list[Path], metadata: Mapping[str, object]) -> str:
    """What the server would refuse for every record: the required run fields (repo,
    head_branch, head_sha) that neither the records nor the options or CI give, as one line
    naming the options; empty when none is missing. A file that cannot be read or parsed is
    left to the upload, which reports it."""
    lacking: dict[str, int] = {}
    for path in files:
        try:
            records = _records(path.read_bytes())
        except (OSError, ValueError):
            continue
        for record in records:
            for field in REQUIRED_RUN_FIELDS:
                if not metadata.get(field) and not (isinstance(record, dict)
                                                    and record.get(field)):
                    lacking[field] = lacking.get(field, 0) + 1
    if not lacking:
        return ""
    options = ", ".join(f"--{field.replace('_', '-')}" for field in lacking)
    counts = ", ".join(f"{field} ({count} records)" for field, count in lacking.items())
    return (f"run metadata missing: {counts}; give {options} (in GitHub Actions they come from "
            "GITHUB_REPOSITORY, GITHUB_HEAD_REF or GITHUB_REF_NAME, and GITHUB_SHA)")


def _records(body: bytes) -> list:
    """The records of a file as the server reads it: a JSON list, one object, or JSON Lines."""
    try:
        found = json.loads(body)
    except ValueError:
        return [json.loads(line) for line in body.splitlines() if line.strip()]
    return found if isinstance(found, list) else [found]


def add_upload_options(parser: argparse.ArgumentParser) -> None:
    """`--upload URL --token T` and one option per run metadata field, for sub-commands
    that write records."""
    sending = parser.add_argument_group(
        "upload", "run metadata not given here comes from the GitHub Actions environment")
    sending.add_argument("--upload", metavar="URL", help="results server to upload records to")
    sending.add_argument("--token", default=os.environ.get("BENCH_UPLOAD_TOKEN"),
                         help="upload token (default: $BENCH_UPLOAD_TOKEN)")
    for field in RUN_FIELDS:
        sending.add_argument(f"--{field.replace('_', '-')}", dest=field, metavar="VALUE")


def missing_token(args: argparse.Namespace) -> bool:
    """Whether --upload was given without a token; says so on stderr."""
    if args.upload and not args.token:
        print("error: --upload needs --token or $BENCH_UPLOAD_TOKEN", file=sys.stderr)
        return True
    return False


def upload_from_cli(records: list[dict], args: argparse.Namespace) -> bool:
    """Upload for a sub-command with `--upload URL --token T` and the RUN_FIELDS
    options; prints the outcome, returns False when the upload failed."""
    metadata = {field: getattr(args, field) for field in RUN_FIELDS if getattr(args, field)}
    try:
        result = upload_records(records, args.upload, args.token, metadata)
    except UploadError as error:
        print(f"upload failed: {error}", file=sys.stderr)
        return False
    state = "stored" if result.created else "already stored"
    print(f"{state} as upload {result.upload_id} ({result.records} records)")
    return True
