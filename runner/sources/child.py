"""`python -m runner.sources.child REQUEST.json ANSWER.json`: run planned cells of one family
in this process (the commit's interpreter and environment) and write each cell's outcome.

REQUEST: {"family": NAME, "cells": [{"key": ..., "cell": {...}}], "settings": {...},
          "files": FOLDER (where the cells write files)}
ANSWER: [{"key", "status", "error", "records"}] in the cells' order.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from runner import families
from runner.engine.run_context import RunContext


def main(request_path: str, answer_path: str) -> int:
    request = json.loads(Path(request_path).read_text())
    family = families.get(request["family"])
    context, state = RunContext.collect(), {}
    answer = []
    for planned in request["cells"]:
        outcome = family.run(planned["cell"], request["settings"], state, context,
                             Path(request["files"]))
        answer.append({"key": planned["key"], "status": outcome.status,
                       "error": outcome.error, "records": outcome.records})
    Path(answer_path).write_text(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
