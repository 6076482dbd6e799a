"""torchao-compatible quantization microbenchmarks.

The API a worker uses, cell by cell:

    spec = runner.quant.spec.load_spec(path)          # or parse_spec(dict): no torch needed
    cells = spec.cells()                              # Cell.to_dict() / Cell.from_dict()
    result = runner.quant.execute.run_cell(cell, baseline_cache, settings)
    records = result.records(runner.environment.RunContext.collect())

or all at once: `runner.quant.execute.run_spec(spec, settings, on_cell=callback)`.
Only `execute` and `timing` import torch at module level.
"""
