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
        if month.outcome == "ordered":
            logger.info("%s: ordered %d rows in %.1f s (series order was %.2f)", month.name,
                        month.rows, month.seconds, month.correlation)
        elif month.outcome == "busy":
            logger.warning("%s: not ordered, its lock not had in time (a long read of it); "
                           "the next night tries again", month.name)
    return sum(month.outcome == "ordered" for month in done)
