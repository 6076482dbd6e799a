"""CI gate: `python -m runner gate --server URL --repo R --base SHA --head SHA`.

Asks the results server to compare two commits (`GET /api/v3/compare`), prints a markdown
summary for a pull-request comment (regressions and improvements, counts, a link to the
comparison page) and exits 1 when a series has a failing status (`--fail-on`, default
"regressed"), 0 otherwise, 2 on usage or connection errors. Plain HTTP (urllib), no Django.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.parse
import urllib.request

FILTERS = ("benchmark", "model", "backend", "mode", "dtype", "device", "arch", "metric")
STATUSES = ("regressed", "improved", "changed", "missing_in_base", "missing_in_head",
            "unchanged")
MAX_ROWS = 30  # per table in the summary
TIMEOUT_S = 120


class GateError(Exception):
    """The comparison could not be had: a refused request or an unreachable server."""


def fetch_comparison(server: str, repo: str, base: str, head: str,
                     filters: dict[str, str] | None = None) -> dict:
    params = {"repo": repo, "base": base, "head": head,
              **{k: v for k, v in (filters or {}).items() if v}}
    url = f"{server.rstrip('/')}/api/v3/compare?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        detail = error.read().decode("utf-8", "replace")
        raise GateError(f"{url}: HTTP {error.code}: {detail}") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        raise GateError(f"{url}: {getattr(error, 'reason', error)}") from None
    except json.JSONDecodeError as error:
        raise GateError(f"{url}: the answer is not JSON: {error}") from None


def markdown(comparison: dict, server: str) -> str:
    """The summary: verdict, counts, tables of regressions and improvements, a link."""
    repo, base, head = comparison["repo"], comparison["base"], comparison["head"]
    counts = comparison["counts"]
    page = (f"{server.rstrip('/')}/compare/{urllib.parse.quote(base)}..."
            f"{urllib.parse.quote(head)}?{urllib.parse.urlencode({'repo': repo})}")
    lines = [
        f"### Benchmarks: `{_code(base[:10])}` → `{_code(head[:10])}` ({_text(repo)})",
        "",
        f"**Verdict: {comparison['verdict']}** — "
        + ", ".join(f"{counts.get(status, 0)} {status.replace('_', ' ')}" for status in STATUSES),
        "",
    ]
    for status, title in (("regressed", "Regressions"), ("improved", "Improvements"),
                          ("changed", "Changes (direction unknown)")):
        rows = [row for row in comparison["rows"] if row["status"] == status]
        if rows:
            lines += [f"#### {title}", "", *_table(rows[:MAX_ROWS])]
            if len(rows) > MAX_ROWS:
                lines.append(f"… and {len(rows) - MAX_ROWS} more")
            lines.append("")
    lines.append(f"[Full comparison]({page})")
    return "\n".join(lines) + "\n"


def _table(rows: list[dict]) -> list[str]:
    lines = ["| Benchmark | Model | Metric | Device | Base | Head | Change | p |",
             "|---|---|---|---|---:|---:|---:|---:|"]
    for row in rows:
        change = "" if row["change"] is None else f"{row['change'] * 100:+.1f} %"
        p_value = "" if row["p_value"] is None else f"{row['p_value']:.2g}"
        cells = [_text(row["benchmark"]), _text(row["model"]), _text(row["metric"]),
                 _text(row["arch"] or row["device"]), f"{row['base']:.4g}",
                 f"{row['head']:.4g}", change, p_value]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _text(value: str) -> str:
    """Names come from uploads: no markdown, no HTML, no table breaks in a comment."""
    escaped = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for char in "\\`*_[]|#!~":
        escaped = escaped.replace(char, "\\" + char)
    return " ".join(escaped.split())


def _code(value: str) -> str:
    return value.replace("`", "'")


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "gate", help="fail CI when benchmarks regressed between two commits",
        description=__doc__.split("\n\n")[1])
    parser.add_argument("--server", required=True, help="base URL, e.g. https://bench.example")
    parser.add_argument("--repo", required=True, help="owner/name")
    parser.add_argument("--base", required=True, metavar="SHA")
    parser.add_argument("--head", required=True, metavar="SHA")
    parser.add_argument("--fail-on", default="regressed", type=_statuses,
                        help=f"comma-separated statuses that fail: {', '.join(STATUSES)} "
                        "(default: regressed)")
    for name in FILTERS:
        parser.add_argument(f"--{name}", help=f"only this {name} (exact)")
    parser.set_defaults(func=run)


def _statuses(text: str) -> set[str]:
    wanted = {part.strip() for part in text.split(",") if part.strip()}
    unknown = sorted(wanted - set(STATUSES))
    if unknown or not wanted:
        raise argparse.ArgumentTypeError(f"unknown status(es) {unknown}: use {', '.join(STATUSES)}")
    return wanted


def run(args: argparse.Namespace) -> int:
    filters = {name: getattr(args, name) for name in FILTERS}
    try:
        comparison = fetch_comparison(args.server, args.repo, args.base, args.head, filters)
    except GateError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(markdown(comparison, args.server), end="")
    failing = sum(comparison["counts"].get(status, 0) for status in args.fail_on)
    return 1 if failing else 0
