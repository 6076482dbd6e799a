"""CI gate: `python -m runner gate --server URL --repo R --base SHA --head SHA`.

Asks the results server to compare two commits (`GET /api/v3/compare`: each series judged
against its own history on the repo's default branch), prints a markdown summary for a
pull-request comment (regressions and improvements with the rule that decided, counts, a
link to the comparison page) and exits with:

  0  pass: no series in a failing state (`--fail-on`, default "regression")
  1  regressions: some series are in a failing state
  2  usage or connection error (bad options, unreachable server, refused request)
  3  cannot compare: unknown repo, unknown, too short or ambiguous sha, or no series with
     results at both commits (the markdown says which): a gate that cannot judge never
     passes; with --same-environment, also where the environment of the base's and the
     head's runs differs on some device, or is not known (or the server does not say)
  4  run again: no series fails, but some regressions the gate's false discovery rate
     held back as noise would fail at the looser rate --confirm (0.4 by default), and the
     head has fewer than --runs runs (3 by default): run the benchmarks at the head commit
     again, upload them and run the gate again. The server judges the head's runs
     together (k runs know its value sqrt(k) times better), so a real change is then
     confirmed and noise cleared. `--runs 1` judges one run as it stands (never 4).

--fdr Q holds the series judged on their history's noise to the false discovery rate Q
(0 < Q <= 0.25) instead of the server's setting (0.005 by default): higher finds an
isolated change more often, and fails quiet comparisons of many series more often.
Asking for another run instead keeps quiet comparisons passing and finds a lone 10 %
regression at 2 % noise as often as a fixed 5 % rule does (`perf/gate_noise.py`).

The summary lists the devices whose environment (torch, CUDA, driver, GPU, image, ...: each
run's fingerprint, jobs compared with their own job) differs between the base's and the
head's runs ("Environment changed"), or is not known: a change there may be the
environment's, not the code's. --same-environment then refuses to judge (exit 3).

Plain HTTP (urllib), no Django.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import urllib.error
import urllib.parse
import urllib.request

FILTERS = ("benchmark", "model", "backend", "mode", "dtype", "device", "arch", "metric")
# The server's states (benchsite.comparison.judge.STATES), in report order.
STATES = ("regression", "improvement", "changed", "noisy", "insufficient_data", "new",
          "missing", "unchanged")
PASS, FAIL, ERROR, CANNOT_COMPARE, RUN_AGAIN = 0, 1, 2, 3, 4
NO_COMMON = "no common results"
MAX_ROWS = 30  # per table in the summary
MAX_FDR = 0.25  # the server's largest false discovery rate (judge.MAX_FDR)
# A held-back regression whose adjusted p is at most this asks for another run of the head
# (exit 4). At 2 % noise, out of 100 series, a lone 10 % step is that far out of the noise
# (p <= 0.004) 96 % of the time, and a quarter of quiet comparisons run again
# (perf/gate_noise.py).
CONFIRM = 0.4
RUNS = 3  # runs of the head after which the gate no longer asks for another
TIMEOUT_S = 120
# The server's environment states (comparison.environments) that --same-environment fails;
# a device that ran at one commit only (base_only, head_only) has no series compared.
CHANGED, UNKNOWN = "changed", "unknown"


class GateError(Exception):
    """The comparison could not be had: a refused request or an unreachable server."""


class CannotCompare(GateError):
    """The server answered that these commits cannot be compared."""


def fetch_comparison(server: str, repo: str, base: str, head: str,
                     filters: dict[str, str] | None = None, fdr: float | None = None) -> dict:
    params = {"repo": repo, "base": base, "head": head,
              **{k: v for k, v in (filters or {}).items() if v},
              **({} if fdr is None else {"fdr": repr(fdr)})}
    url = f"{server.rstrip('/')}/api/v3/compare?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        detail = error.read().decode("utf-8", "replace")
        try:
            answer = json.loads(detail)
        except json.JSONDecodeError:
            answer = {}
        if isinstance(answer, dict) and answer.get("cannot_compare"):
            raise CannotCompare("; ".join(answer.get("errors") or [detail])) from None
        raise GateError(f"{url}: HTTP {error.code}: {detail}") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        raise GateError(f"{url}: {getattr(error, 'reason', error)}") from None
    except json.JSONDecodeError as error:
        raise GateError(f"{url}: the answer is not JSON: {error}") from None


def markdown(comparison: dict, server: str, again: list[dict] | None = None,
             confirm: float | None = None) -> str:
    """The summary: verdict, counts, tables of regressions, improvements, the changes to
    run again (`again`, at the rate `confirm`) and the other changes within the noise, a
    link."""
    again = again or []
    repo, base, head = comparison["repo"], comparison["base"], comparison["head"]
    counts = comparison["counts"]
    query = {"repo": repo}
    if isinstance(comparison.get("fdr"), int | float):
        query["fdr"] = f"{comparison['fdr']:g}"  # the page then judges as the gate did
    page = (f"{server.rstrip('/')}/compare/{urllib.parse.quote(base)}..."
            f"{urllib.parse.quote(head)}?{urllib.parse.urlencode(query)}")
    lines = [
        f"### Benchmarks: `{_code(base[:10])}` → `{_code(head[:10])}` ({_text(repo)})",
        "",
        f"**Verdict: {comparison['verdict']}** — "
        + ", ".join(f"{counts.get(state, 0)} {state.replace('_', ' ')}" for state in STATES),
        "",
        f"Each series is judged against its history on "
        f"{', '.join(f'`{_code(b)}`' for b in comparison.get('branches', []))}: "
        "its change must pass the metric's tolerance and its noise"
        + (f" (false discovery rate {comparison['fdr']:g} over the series compared)."
           if isinstance(comparison.get("fdr"), int | float) else "."),
        "",
    ]
    if comparison["verdict"] == NO_COMMON:
        lines += ["**Cannot compare:** no series has results at both commits.", ""]
    lines += _environment(comparison.get("environment") or [])
    for state, title in (("regression", "Regressions"), ("improvement", "Improvements"),
                         ("changed", "Changes (direction unknown)")):
        lines += _section(title, [row for row in comparison["rows"] if row["state"] == state])
    lines += _section("Run again", again, MAX_ROWS // 3, (
        f"{len(again)} series would fail at a false discovery rate of {confirm:g} but not at "
        "the gate's. Run the benchmarks again at the head commit, upload the results and run "
        "the gate again: it judges the head's runs together, which confirms a real change or "
        "clears noise.") if again else "")
    listed = {id(row) for row in again}  # (rows of this comparison)
    noisy = [row for row in comparison["rows"]
             if row["state"] == "noisy" and id(row) not in listed]
    lines += _section("Within the noise", noisy, MAX_ROWS // 3, (
        f"{len(noisy)} series moved past their tolerance but not out of their noise. Running "
        "the benchmarks again at the head commit and uploading the results judges its runs "
        "together, which confirms a real change or clears noise."))
    lines.append(f"[Full comparison]({page})")
    return "\n".join(lines) + "\n"


def _section(title: str, rows: list[dict], limit: int = MAX_ROWS, intro: str = "") -> list[str]:
    """A titled table of the first `limit` rows (nothing without rows)."""
    if not rows:
        return []
    more = [f"… and {len(rows) - limit} more"] if len(rows) > limit else []
    return [f"#### {title}", "", *([intro, ""] if intro else []), *_table(rows[:limit]),
            *more, ""]


def _environment(entries: list[dict]) -> list[str]:
    """A line per device (and job) whose environment changed, then those not known."""
    lines = []
    for state, title, intro in (
            (CHANGED, "Environment changed", ""),
            (UNKNOWN, "Environment unknown", "No environment recorded with the runs: the "
             "gate cannot tell whether it moved with the code.")):
        listed = [f"- {_where(entry)}: {_text(entry['summary'].replace(' -> ', ' → '))}"
                  for entry in entries if entry.get("state") == state]
        if listed:
            lines += [f"#### {title}", "", *([intro, ""] if intro else []), *listed, ""]
    return lines


def _where(entry: dict) -> str:
    """The device of an environment entry, with its job where it has one."""
    device = _text(entry.get("arch") or entry.get("device") or "?")
    return f"{device} (job {_text(entry['job'])})" if entry.get("job") else device


def environment_refusal(comparison: dict) -> str:
    """Why --same-environment cannot pass this comparison ("" when it can): the devices
    whose environment differs or is not known, or a server that does not report them."""
    entries = comparison.get("environment")
    if not isinstance(entries, list):
        return "the server did not report the runs' environments"
    reasons = []
    for state, says in ((CHANGED, "the environment differs on"),
                        (UNKNOWN, "the environment is not known on")):
        devices = dict.fromkeys(entry.get("arch") or entry.get("device") or "?"
                                for entry in entries if entry.get("state") == state)
        if devices:
            reasons.append(f"{says} {', '.join(devices)}")
    return "; ".join(reasons)


def _table(rows: list[dict]) -> list[str]:
    lines = ["| Benchmark | Model | Metric | Device | Base | Head | Change | Why |",
             "|---|---|---|---|---:|---:|---:|---|"]
    for row in rows:
        change = "" if row["change"] is None else f"{row['change'] * 100:+.1f} %"
        cells = [_text(row["benchmark"]), _model(row), _text(row["metric"]),
                 _text(row["arch"] or row["device"]), _number(row["base"]),
                 _number(row["head"]), change, _text(row["rule"])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


def _model(row: dict) -> str:
    """The model with what else tells its series apart (backend, mode, dtype)."""
    details = ", ".join(row[name] for name in ("backend", "mode", "dtype") if row.get(name))
    return _text(row["model"] + (f" ({details})" if details else ""))


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
        description=__doc__.split("\n\n", 1)[1].rsplit("\n\n", 1)[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True, help="base URL, e.g. https://bench.example")
    parser.add_argument("--repo", required=True, help="owner/name")
    parser.add_argument("--base", required=True, metavar="SHA")
    parser.add_argument("--head", required=True, metavar="SHA")
    parser.add_argument("--fail-on", default="regression", type=_states,
                        help=f"comma-separated states that fail: {', '.join(STATES)} "
                        "(default: regression)")
    parser.add_argument("--fdr", type=_fdr, metavar="Q",
                        help=f"false discovery rate over the series compared (0 < Q <= "
                        f"{MAX_FDR:g}; default: the server's setting, 0.005 unless changed): "
                        "higher finds an isolated change more often and fails quiet "
                        "comparisons more often")
    parser.add_argument("--confirm", type=_confirm, default=CONFIRM, metavar="Q",
                        help="exit 4 (run again) when no series fails but some would at this "
                        f"looser false discovery rate (0 < Q <= 1; default: {CONFIRM:g}) and "
                        "the head has fewer than --runs runs")
    parser.add_argument("--runs", type=_runs, default=RUNS, metavar="N",
                        help="runs of the head after which the gate stops asking for another "
                        f"(default: {RUNS}; 1: judge one run as it stands, never exit 4)")
    parser.add_argument("--same-environment", action="store_true",
                        help="exit 3 (cannot compare) when the environment of the base's and "
                        "the head's runs differs on some device, or is not known")
    for name in FILTERS:
        parser.add_argument(f"--{name}", help=f"only this {name} (exact)")
    parser.set_defaults(func=run)


def _states(text: str) -> set[str]:
    wanted = {part.strip() for part in text.split(",") if part.strip()}
    unknown = sorted(wanted - set(STATES))
    if unknown or not wanted:
        raise argparse.ArgumentTypeError(f"unknown state(s) {unknown}: use {', '.join(STATES)}")
    return wanted


def _runs(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of runs, 1 or more")
    return int(text)


def _fdr(text: str, most: float = MAX_FDR) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= most:  # NaN fails too
        raise argparse.ArgumentTypeError(
            f"{text!r}: a false discovery rate above 0 and at most {most:g}, e.g. 0.05")
    return value


def _confirm(text: str) -> float:
    return _fdr(text, 1.0)


def run(args: argparse.Namespace) -> int:
    filters = {name: getattr(args, name) for name in FILTERS}
    try:
        comparison = fetch_comparison(args.server, args.repo, args.base, args.head, filters,
                                      getattr(args, "fdr", None))
    except CannotCompare as error:
        print(f"### Benchmarks: cannot compare ({_text(args.repo)})\n\n{_text(str(error))}")
        print(f"error: cannot compare: {error}", file=sys.stderr)
        return CANNOT_COMPARE
    except GateError as error:
        print(f"error: {error}", file=sys.stderr)
        return ERROR
    failing = sum(comparison["counts"].get(state, 0) for state in args.fail_on)
    again = [] if failing else run_again(comparison, args.fail_on, args.confirm, args.runs)
    print(markdown(comparison, args.server, again, args.confirm), end="")
    if comparison["verdict"] == NO_COMMON:
        print("error: cannot compare: no series has results at both commits", file=sys.stderr)
        return CANNOT_COMPARE
    refusal = environment_refusal(comparison) if args.same_environment else ""
    if refusal:
        print(f"**Cannot compare** (--same-environment): {_text(refusal)}.")
        print(f"error: cannot compare: {refusal}", file=sys.stderr)
        return CANNOT_COMPARE
    return FAIL if failing else RUN_AGAIN if again else PASS


def run_again(comparison: dict, fail_on: set[str], confirm: float, runs: int) -> list[dict]:
    """The rows the false discovery rate held back as noisy from a failing state that the
    looser rate `confirm` would let through, while the head has fewer than `runs` runs."""
    return [row for row in comparison["rows"]
            if row["state"] == "noisy" and row.get("held") in fail_on
            and row.get("adjusted_p") is not None and row["adjusted_p"] <= confirm
            and row.get("head_runs", 1) < runs]
