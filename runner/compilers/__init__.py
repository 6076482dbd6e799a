"""The compilers family, a model experiment matrix: models x backends x tests x dtypes, each
configuration run in its own subprocess with a timeout, written as seed 001's `results.jsonl`
and as OSS records (shaped like the HUD's TorchInductor records).

Modules: `models` (the built-in suite, users' factories, TorchBench), `matrix` (configurations
and filters), `spec` (the YAML spec), `harness` (building a model for a backend and its
step), `metrics` (timing, compile time, memory, dynamo counters, profiles), `verify` (the
verification codes), `child` (the subprocess entry), `launch` (running one configuration in
its subprocess), `results` (results.jsonl), `records` (OSS records) and `family` (the
runner.families interface, its benchmark name and metric directions). Its command line,
`python -m runner compilers`, is runner.cli.compilers.
"""
