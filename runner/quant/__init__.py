"""torchao-compatible quantization microbenchmarks.

The API a worker uses, cell by cell:

    spec = runner.quant.spec.load_spec(path)     # or parse_spec(dict): no torch needed
    cells = spec.cells()                         # QuantCell.to_dict() / QuantCell.from_dict()
    result = runner.quant.execute.run_cell(cell, baseline_cache, settings)
    records = runner.quant.records.cell_records(result, RunContext.collect())

or all at once: `runner.quant.execute.run_spec(spec, settings, on_cell=callback)`.
`RunContext` is runner.engine.run_context's, `settings` are
runner.engine.timing_data.TimingSettings. Only `execute` imports torch at module level; the
command line (`python -m runner run`) is runner.cli.quant.
"""
