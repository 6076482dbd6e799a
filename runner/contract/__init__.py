"""The record contract: what every writer of PyTorch OSS benchmark ("v3") records and every
reader of them in this project agrees on. Pure Python (no Django, no torch).

- `record`: the run fields and the v3 record as msgspec Structs (the server's fast path decodes
  with them, writers' tests check their output with `problems`).
- `metrics`: the `metric` part of a record, numeric or text.
- `status`: a cell's outcome statuses and the "status" record of a cell that did not run.
- `names`: each family's benchmark name, metric names and how it names its models.
- `directions`: which way is better for a metric: an explicit table, inference for the rest.
- `repos`: repo names in GitHub's grammar (`OWNER/NAME`) and the patterns grants hold.

Everything else (dashboards, demo data, catalog, regressions) imports names from here; a
series name written as a literal elsewhere is a bug waiting for a rename.
"""
