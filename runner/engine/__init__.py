"""What a worker needs to run a cell, for every family: a planned cell and its outcome
(`cells`), reading specs (`specs`), a cell's files (`folders`), run settings checked against
their dataclass (`run_settings`), timing as plain data (`timing_data`) and the torch timers that
take it (`torch_timers`), paired speedups (`paired`), the torch device a cell runs on
(`torch_devices`), the machine's state while it measures (`machine_state`) and what the records
say about the run's machine and software (`run_context`).

The command line is runner.cli; nothing here imports it (import-linter checks).
"""
