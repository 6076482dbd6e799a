"""Maintenance of the results table, for celery beat."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import connection

from benchsite.results import partitions

logger = logging.getLogger(__name__)


@shared_task
def order_months() -> int:
    """For celery beat (settings.CELERY_BEAT_SCHEDULE, nightly): settled months rewritten in
    their series' order (`partitions.order_months`); returns how many were."""
    done = partitions.order_months(connection)
    for month in done:
        if month.outcome in ("ordered", "busy"):
            logger.log(logging.WARNING if month.outcome == "busy" else logging.INFO,
                       month.describe())
    return sum(month.outcome == "ordered" for month in done)
