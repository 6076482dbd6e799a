#!/usr/bin/env bash
# perf/gpu_check.py on the lent GPU machine (issue 29), in one call, within 8 minutes.
#
# That machine has torch 2.11 (python3 is Python 3.12 with PyTorch, PyYAML, tqdm, numpy,
# tabulate) and no network: the runner's other needs, torchao and msgspec, travel as wheels.
# The device tool sends the session's own checkout: this script and perf/gpu_check.py must
# be in it (merged), and the wheels in its ignored .whl/ folder.
#
# Once, here, in the repository root (pip with network; the versions the runner pins; .whl/
# and .torchao/ are git-ignored):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
#     --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     torchao==0.18.0 msgspec==0.22.0
#   (torchao 0.18 is built for a newer torch: its C++ kernels do not load on 2.11, its
#   Python does, which is all int8dq and float8dq-row use. If it fails to import there,
#   carry the torchao release built for torch 2.11 instead.)
# Optional, for (c): torchao's runner is in its source tree, not in the wheel. Copy a torchao
# checkout's benchmarks/ folder (a package: benchmarks/__init__.py,
# benchmarks/microbenchmarks/...) to .torchao/benchmarks; without it the check says "not importable" and skips that target.
# Rebuilt from pytorch/ao on 2026-11-28 for torchao 0.18 (no checkout at hand): benchmark_runner.py
# @0f6b34f, utils.py @00ee982, profiler.py @48a0957, benchmark_inference.py of PR #2613 with
# its four result attributes renamed to utils.py's (baseline_model_eager_*, ...; else every
# time reads 0.0), and one fix: it compiled the cached baseline in place, so the first recipe
# of every shape failed on torch >= 2.11 ("function marked as skipped ...
# OptimizedModule.__call__"); the compiled baseline is now a name of its own. Its runner
# lists no baseline row unless `baseline` is a recipe, and times with
# torch.utils.benchmark.Timer (100 warm-up, 100 timed calls, host-timed).
#
# Then, through the device tool (one call; the check itself stops itself at 9.5 minutes):
#   run(command="bash perf/gpu_check_device.sh", carry=[".whl", ".torchao"], timeout_s=600)
# Arguments go on to perf/gpu_check.py (e.g. --rotate-weights: our runs time cold calls over
# rotated weight copies, not yet run on a GPU; 2026-11-29's run is the table to compare with); CHECK_TIMEOUT (seconds, default 570) bounds the check
# where less device time is left (e.g. CHECK_TIMEOUT=400 ... --skip-torchao). The session's 15 device minutes hold one such call
# (the machine's start takes a minute or two): prepare everything here first.
# On an H200 (2026-11-28) `CHECK_TIMEOUT=540` ran 506 s, with 40 s more for the machine's
# start and the transfers; on 2026-11-29 530 s, 561 s of device time with the start, and
# perf/gpu_cost_probe.py right after on the warm machine (--policies no-caches,fresh-picks
# --deadline 200) 112 s more. Where the time goes, with what is left of the session's device
# time (about 3 minutes): perf/gpu_cost_probe.py (its docstring), after the same pip line.
# What comes back under $OUT: gpu_check.txt (the table and targets), gpu_check.json (the
# summary), records.json (every run's records), torchao.csv (its runner's CSV), log.
set -uo pipefail
out="${OUT:-gpu_check_out}"
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
python3 -c "import torch, torchao, msgspec, yaml, tqdm; print('torch', torch.__version__,
'torchao', torchao.__version__, torch.cuda.get_device_name())" 2>&1 | grep -v '^Failed to load' \
  || exit 3
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv || true
args=(--device cuda --out "$out" "$@")  # e.g. --budget 1 for less time per speedup
[ -d .torchao/benchmarks ] && args+=(--torchao-src .torchao)
timeout "${CHECK_TIMEOUT:-570}" python3 perf/gpu_check.py --deadline "$(( ${CHECK_TIMEOUT:-570} - 10 ))" "${args[@]}" 2>&1 | tee "$out/log"
