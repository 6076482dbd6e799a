"""Detection on ingestion: every stored upload queues `detect_upload` on the control queue
(run in-process only in the tests)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.dispatch import receiver

from benchsite.regressions.tasks import detect_upload
from benchsite.results.signals import upload_stored

logger = logging.getLogger(__name__)


@receiver(upload_stored, dispatch_uid="regressions.detect_after_upload")
def detect_after_upload(sender, upload_id: int, **kwargs) -> None:
    if not settings.BENCH_DETECT_ON_UPLOAD:
        return
    try:
        detect_upload.delay(upload_id)
    except Exception:
        # The upload is stored whatever happens here: a failed detection (in-process in the
        # tests) or an unreachable broker must not turn its response into an error.
        logger.exception("regression detection for upload %s failed", upload_id)
