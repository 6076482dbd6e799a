"""Benchmark engine: runs benchmark specs with PyTorch and writes PyTorch OSS "v3" records.

Pure Python: nothing here imports Django, so a CI job can install only the runner.
"""
