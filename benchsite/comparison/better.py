"""The two answers to "which way is better" (the record contract's `HIGHER` and `LOWER`), for
the pure numeric code (the judge, the detectors) that must not need Django. Everything else
asks the door, `benchsite.comparison.directions`, which also reads the admin's overrides
and re-exports these."""

from runner.contract.directions import HIGHER, LOWER

__all__ = ["HIGHER", "LOWER"]
