"""torchao-compatible quantization microbenchmarks.

The API a worker uses, cell by cell:

    spec = runner.quant.spec.load_spec(path)     # or parse_spec(dict): no torch needed
    cells = spec.cells()                         # QuantCell.to_dict() / QuantCell.from_dict()
    result = runner.quant.execute.run_cell(cell, baseline_cache, settings)
    records = runner.quant.records.cell_records(result, runner.environment.RunContext.collect())

or all at once: `runner.quant.execute.run_spec(spec, settings, on_cell=callback)`.
`settings` are runner.timing.TimingSettings. Only `execute` imports torch at module level;
`cli` is `python -m runner run`.
"""
