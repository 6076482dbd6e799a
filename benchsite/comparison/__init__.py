"""Comparison: judging series between commits, and the site's one answer to "which way is
better" (`directions`). Below `regressions` and `jobs`, above `results`; it imports neither
detection nor its settings: callers pass the rules a comparison is judged with."""
