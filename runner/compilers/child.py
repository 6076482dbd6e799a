"""`python -m runner.compilers.child CONFIG.json RESULT.json`: one configuration, in the
process of its own that `launch` starts, so a crash, a hang or leaked memory ends with it.

It times the configuration (and a backend's speedup, paired with eager), then verifies it,
and writes {"metrics", "verification_code"} to RESULT.json. An exception while timing is
caught and kept in `metrics.error`; the verifier still runs (its code says what it could
tell).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from runner.compilers.harness import prepare
from runner.compilers.matrix import EAGER, Config
from runner.compilers.metrics import measure, pair_with_eager
from runner.compilers.verify import verify


def run(config: Config) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    errors = []
    try:
        prepared = prepare(config)
        metrics = measure(config, prepared)
        if config.backend != EAGER:
            metrics["paired"] = pair_with_eager(config, prepared).to_dict()
    except Exception:
        errors.append(traceback.format_exc())
    gc.collect()
    code, verifier_error = verify(config)
    if verifier_error:
        errors.append(f"verifier ({code}):\n{verifier_error}")
    if errors:
        metrics["error"] = "\n".join(errors)
    return {"metrics": metrics, "verification_code": str(code)}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m runner.compilers.child CONFIG.json RESULT.json",
              file=sys.stderr)
        return 2
    config = Config.from_dict(json.loads(Path(argv[0]).read_text()))
    result = run(config)
    target = Path(argv[1])
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(result, default=str))
    os.replace(partial, target)  # the parent never reads half a file
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
