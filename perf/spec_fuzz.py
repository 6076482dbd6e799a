"""Spec and recipe fuzzing for perf/api_fuzz.py: generated job specs (YAML aliases and alias
bombs, deep nesting, `class` keys naming callables at any depth, paths that climb out) sent to
`POST /api/v3/jobs`, and oversized bodies sent to the upload and jobs endpoints with the web
process's peak memory measured.

Nothing is run: submitted jobs are not queued. A spec must be answered below 500, and no
module that a recipe names may be imported.
"""

from __future__ import annotations

import collections
import gzip
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

CALLABLES = ["importlib.import_module", "os.system", "builtins.eval", "builtins.exec",
             "subprocess.run", "torchao.prototype.parq.utils.import_module",
             "torchao.quantization.quantize_", "torchao.core.config.config_from_dict"]
CLASSES = [*CALLABLES, "torchao.quantization.PerRow", "torchao.quantization.PerGroup",
           "torchao.quantization.Int8WeightOnlyConfig", "torch.nn.Linear", ""]
PATHS = ["results", "/tmp/fuzz-abs", "../../../../../tmp/fuzz-up", "a/../../b", "~root/x",
         "C:\\x", "a\x00b", "", ".", "..", "x/" * 50]
# Modules a recipe names that a check must never import (those already loaded are not told).
WATCHED = sorted({path.rpartition(".")[0] for path in CALLABLES} | {"this", "antigravity"})


def scalars() -> st.SearchStrategy:
    return st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                     st.text(max_size=20), st.sampled_from(["torch.int8", "torch.nn",
                                                            "torch.bfloat16", "this"]))


def arguments() -> st.SearchStrategy:
    """Keyword argument values: plain data and `{class, kwargs}` objects, nested."""
    return st.recursive(scalars(), lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(max_size=8), inner, max_size=3),
        st.fixed_dictionaries({"class": st.sampled_from(CLASSES)},
                              optional={"kwargs": st.dictionaries(
                                  st.sampled_from(["name", "group_size", "x"]), inner,
                                  max_size=2)})),
        max_leaves=12)


def recipes() -> st.SearchStrategy:
    custom = st.fixed_dictionaries(
        {"name": st.sampled_from(["fuzz", "int8wo", "a b", ""]),
         "config": st.sampled_from(CLASSES)},
        optional={"kwargs": st.dictionaries(st.sampled_from(["granularity", "group_size",
                                                             "weight_dtype", "class", "1"]),
                                            arguments(), max_size=3)})
    return st.one_of(st.sampled_from(["int8wo", "int8dq", "nope"]), custom)


def specs() -> st.SearchStrategy:
    """A spec's data, mostly well-formed so that the checks past YAML are reached."""
    shapes = st.lists(st.lists(st.integers(-1, 64), min_size=2, max_size=4), max_size=4)
    return st.fixed_dictionaries(
        {"quantization_config_recipe_names": st.lists(recipes(), max_size=3),
         "model_params": st.fixed_dictionaries(
             {"matrix_shapes": st.just([{"name": "custom"}]).flatmap(
                 lambda base: shapes.map(lambda s: [{**base[0], "shapes": s}])),
              "device": st.sampled_from(["cpu", "tpu"]),
              "torch_compile_mode": st.just(False)},
             optional={"enable_profiler": st.booleans()})},
        optional={"output_dir": st.sampled_from(PATHS), "family": st.sampled_from(
            ["quantization", "compilers", "kernels", "instructions", "nope"]),
                  "models": st.lists(st.fixed_dictionaries(
                      {"factory": st.sampled_from(["m:f", "os:system"]),
                       "name": st.sampled_from(["ok", "../../x", "a/b"])}), max_size=2)})


def accepted_specs() -> st.SearchStrategy:
    """Specs the site takes (their recipes' arguments are checked for form only), so that
    generated data also goes past the checks into a stored job."""
    granularity = st.fixed_dictionaries({"class": st.sampled_from(
        ["torchao.quantization.PerRow", "torchao.quantization.PerTensor"])})
    custom = st.fixed_dictionaries({
        "name": st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(
            lambda name: not name.startswith(("int", "float", "baseline"))),
        "config": st.just("torchao.quantization.Float8WeightOnlyConfig"),
        "kwargs": st.fixed_dictionaries({}, optional={
            "granularity": granularity, "weight_dtype": st.just("torch.float8_e5m2")})})
    recipe_lists = st.lists(st.one_of(st.sampled_from(["int8wo", "int8dq"]), custom),
                            min_size=1, max_size=3, unique_by=lambda r: str(r))
    shapes = st.lists(st.lists(st.integers(1, 64), min_size=3, max_size=3), min_size=1,
                      max_size=3)
    return st.fixed_dictionaries({
        "quantization_config_recipe_names": recipe_lists,
        "output_dir": st.sampled_from(["results", "a/b", "."]),
        "model_params": shapes.map(lambda s: {"matrix_shapes": [{"name": "custom",
                                                                 "shapes": s}],
                                              "device": "cpu", "torch_compile_mode": False})})


def bombs() -> st.SearchStrategy:
    """YAML that is small as text and large or endless once aliases are expanded, or deep."""
    def alias_bomb(fan: int, levels: int) -> str:
        lines = [f"      a0: &a0 [{', '.join(['x'] * fan)}]"]
        lines += [f"      a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fan)}]"
                  for i in range(1, levels)]
        return ("quantization_config_recipe_names:\n  - name: bomb\n"
                "    config: torchao.quantization.Int8WeightOnlyConfig\n    kwargs:\n"
                + "\n".join(lines) + "\nmodel_params: {matrix_shapes: [{name: custom}]}\n")

    return st.one_of(
        st.builds(alias_bomb, st.integers(2, 12), st.integers(2, 12)),
        st.integers(10, 20_000).map(lambda depth: "a: " + "[" * depth + "]" * depth + "\n"),
        st.just("a: &a [1, *a]\n"),
        st.just("quantization_config_recipe_names: &r [int8wo, *r]\n"))


def spec_texts() -> st.SearchStrategy:
    return st.one_of(st.one_of(accepted_specs(), specs()).map(
        lambda data: yaml.safe_dump(data, allow_unicode=True)), bombs())


def fuzz_specs(client, auth: dict[str, str], examples: int, seed_value: int) -> dict:
    """POST generated specs to /api/v3/jobs: counts by status, 5xx examples, slowest answer,
    and the watched modules that got imported."""
    counts: collections.Counter = collections.Counter()
    errors: dict[int, str] = {}
    slowest = [0.0]
    loaded = set(sys.modules)

    @seed(seed_value)
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(text=spec_texts())
    def send(text):
        started = time.perf_counter()
        response = client.post("/api/v3/jobs", {"spec": text, "queue": "cpu"},
                               content_type="application/json", **auth)
        slowest[0] = max(slowest[0], time.perf_counter() - started)
        counts[response.status_code] += 1
        if response.status_code >= 500:
            errors.setdefault(response.status_code, text[:500])

    send()
    imported = [name for name in WATCHED if name in sys.modules and name not in loaded]
    return {"counts": counts, "errors": errors, "slowest_s": slowest[0], "imported": imported}


def peak_rss_mb(action: Callable[[], object]) -> tuple[object, float, float]:
    """What `action` returned, its seconds, and the process's peak RSS rise (MB) while it
    ran (Linux: the high-water mark is reset first)."""
    Path("/proc/self/clear_refs").write_text("5")
    before = _status_kb("VmHWM")
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started, (_status_kb("VmHWM") - before) / 1024


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise KeyError(field)


def oversized(client, auth: dict[str, str], upload_limit: int, record: dict) -> list[tuple]:
    """(what, status, seconds, peak RSS rise MB, body bytes, response bytes) for a small valid
    upload (the baseline) and each oversized or bad body. The client runs in this process:
    the rise includes the body it holds (an over-limit body refused unread costs about its
    own size)."""
    line = json.dumps(record).encode()
    count = max(1, (upload_limit - 1024) // (len(line) + 1))
    near_limit = b"[" + b",".join([line] * (count - 1)) + b"," + json.dumps(
        {**record, "metric": {"name": "x", "benchmark_values": ["not a number"]}}).encode() + b"]"
    over_limit = b"[" + b",".join([line] * (count + count // 10 + 10)) + b"]"
    bomb = gzip.compress(b"[" + b" " * (upload_limit * 4) + b"]")
    spec = json.dumps({"spec": "a: " + "x" * (50 * 1024 * 1024), "queue": "cpu"}).encode()
    cases = [
        ("upload: one valid record (baseline)", "/api/v3/results", b"[" + line + b"]", {}),
        ("upload: near the limit, one bad record", "/api/v3/results", near_limit, {}),
        ("upload: over the limit", "/api/v3/results", over_limit, {}),
        ("upload: gzip bomb", "/api/v3/results", bomb, {"HTTP_CONTENT_ENCODING": "gzip"}),
        ("jobs: a 50 MB spec", "/api/v3/jobs", spec, {}),
    ]
    rows = []
    for what, url, body, headers in cases:
        response, seconds, rss = peak_rss_mb(lambda url=url, body=body, headers=headers: (
            client.post(url, body, content_type="application/json", **auth, **headers)))
        rows.append((what, response.status_code, seconds, rss, len(body),
                     len(response.content)))
    return rows
