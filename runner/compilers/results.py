"""results.jsonl: one line per configuration, in seed 001's shape.

    {"model": {"suite_name", "model_name"},
     "experiment": {"accelerator", "accelerator_model", "backend", "test", "dtype",
                    "batch_size"},
     "repeat", "iterations_per_run", "metrics": {...}, "timestamp", "verification_code"}

`metrics` holds lists with one value per repetition (total_time, per_iter_time) and single
values (first_iter_time, compile_time, peak_memory_mb, graphs, graph_breaks,
dynamo_counters), or `error` (a traceback, a crash's last output or a timeout) when the
configuration did not run through.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runner.compilers.matrix import Config, key_of

NAME = "results.jsonl"


def line(config: Config, accelerator_model: str, timestamp: int, metrics: dict[str, Any],
         verification_code: str) -> dict[str, Any]:
    return {
        "model": {"suite_name": config.model.suite, "model_name": config.model.name},
        "experiment": {
            "accelerator": config.device,
            "accelerator_model": accelerator_model,
            "backend": config.backend,
            "test": config.test,
            "dtype": config.dtype,
            "batch_size": config.effective_batch_size,
        },
        "repeat": config.repeat,
        "iterations_per_run": config.iterations_per_run,
        "metrics": metrics,
        "timestamp": timestamp,
        "verification_code": verification_code,
    }


def key(result: dict[str, Any]) -> str:
    model, experiment = result["model"], result["experiment"]
    return key_of(model["suite_name"], model["model_name"], experiment["backend"],
                  experiment["test"], experiment["dtype"], experiment["accelerator"],
                  experiment["batch_size"])


def read(path: Path) -> dict[str, dict[str, Any]]:
    """The lines of a results file by configuration key (the last line of a key wins); a
    line that is not a result is an error naming the file and line."""
    found: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return found
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        if not text.strip():
            continue
        try:
            result = json.loads(text)
            found[key(result)] = result
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{path}:{number}: not a results line ({error})") from None
    return found


def append(path: Path, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as stream:
        stream.write(json.dumps(result, ensure_ascii=False, default=str) + "\n")
