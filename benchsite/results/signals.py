"""Signals for what other apps do after results are stored (e.g. regression detection)."""

from django.dispatch import Signal

# Sent once the transaction that stored an upload has committed; kwargs: upload_id.
upload_stored = Signal()
