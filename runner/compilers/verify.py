"""Verification codes, with the semantics of PyTorch/XLA's experiment runner (seed 001).

`--verify` checks a configuration's result against eager, as PyTorch's HUD accuracy runs do,
with torch._dynamo.utils.same (the HUD's comparison). Each run below builds the model afresh
from the same seed, runs one step and keeps its output (eval: the output; train: output,
loss and every parameter's gradient):

1. Eager runs twice. If either raises: EAGER_FAILED (the benchmark should not be running).
2. If the two eager outputs are not the same with zero tolerance (NaNs equal):
   NONDETERMINISTIC_EAGER_RUN - we cannot tell right from wrong, so nothing is compared.
3. Eager runs once more in float64: the reference that decides, when the configuration's
   output is not allclose to eager's, whether its error (RMSE against float64) is within a
   small multiple of eager's own error. If the float64 run raises, there is no reference
   and the comparison falls back to cosine similarity.
4. The configuration itself runs (its backend, its dtype).
5. FAIL when its output is not the same as the first eager output under the model's
   tolerance (default, as in the seed: 1e-2 for eval; for train 1e-3 on CUDA, else 1e-4)
   and cosine setting; PASS otherwise.
Any other exception in 2-5 (the backend raising, outputs of different structure) is
EXCEPTION_RAISED; the traceback goes into the line's `metrics.error`, as the seed does.

Two codes are decided elsewhere: VERIFIER_SKIPPED when --verify was not given or the model
asks to skip verification (`skip_verifier`), and VERIFIER_DIDNT_RUN, written by the parent
when the configuration's subprocess crashed or timed out, so no code could be computed.

Unlike the seed, which under --verify verifies instead of timing, a configuration is timed
first and then verified in the same subprocess, so one run gives speedup and accuracy.
"""

from __future__ import annotations

import traceback
from enum import StrEnum
from typing import Any

from runner.compilers.matrix import EAGER, Config


class Code(StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    EAGER_FAILED = "EAGER_FAILED"
    EXCEPTION_RAISED = "EXCEPTION_RAISED"
    NONDETERMINISTIC_EAGER_RUN = "NONDETERMINISTIC_EAGER_RUN"
    VERIFIER_SKIPPED = "VERIFIER_SKIPPED"
    VERIFIER_DIDNT_RUN = "VERIFIER_DIDNT_RUN"


def tolerance(config: Config) -> float:
    if config.model.tolerance is not None:
        return config.model.tolerance
    if config.test == "eval":
        return 1e-2
    return 1e-3 if config.device == "cuda" else 1e-4


def verify(config: Config) -> tuple[Code, str | None]:
    """The configuration's code and, when something raised, its traceback."""
    if not config.verify or config.model.skip_verifier:
        return Code.VERIFIER_SKIPPED, None
    try:
        eager = _output(config, EAGER)
        again = _output(config, EAGER)
    except Exception:
        return Code.EAGER_FAILED, traceback.format_exc()
    try:
        if not _same(eager, again, tol=0.0):
            return Code.NONDETERMINISTIC_EAGER_RUN, None
        cosine = config.model.cosine
        try:
            reference = _output(config, EAGER, dtype="float64")
        except Exception:
            reference, cosine = None, True
        output = _output(config, config.backend)
        if not _same(eager, output, fp64_ref=reference, cos_similarity=cosine,
                     tol=tolerance(config)):
            return Code.FAIL, None
    except Exception:
        return Code.EXCEPTION_RAISED, traceback.format_exc()
    return Code.PASS, None


def _output(config: Config, backend: str, dtype: str | None = None) -> Any:
    from runner.compilers.harness import prepare, reset_rng, synchronize  # torch: child only

    prepared = prepare(config, backend=backend, dtype=dtype)
    reset_rng()
    output = prepared.step(True)
    synchronize(config.device)
    return output


def _same(ref: Any, res: Any, **options: Any) -> bool:
    from torch._dynamo.utils import same  # torch: the parent imports Code, never torch

    return same(ref, res, equal_nan=True, **options)
