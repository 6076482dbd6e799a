"""Benchmark engine: runs benchmark specs with PyTorch and writes PyTorch OSS "v3" records.

Pure Python: nothing here imports Django, so a CI job can install only the runner.

- runner.engine: what a worker needs to run a cell (cells, specs, timing, devices, run context)
- runner.families: the families (runner.quant, .kernels, .compilers, .instructions), each
  registered with `runner.families.register`
- runner.contract: the v3 record contract (record, metrics, names, directions)
- runner.sources: a project's commits on a worker (bisects)
- runner.cli: the command line (`python -m runner ...`); nothing else imports it
"""

# The built-in families are registered here, whichever runner module is imported first: the
# contract's directions answer for their metrics from the tables they declare.
from runner import families  # noqa: F401
