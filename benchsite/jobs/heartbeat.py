"""A running unit's heartbeat: a thread of the process running it writes the time every
BENCH_HEARTBEAT_INTERVAL s, so it stops exactly when that process dies (killed pool child,
lost worker, lost machine) and the sweeper can tell (BENCH_HEARTBEAT_TIMEOUT). Job cells and
bisects both beat this way."""

from __future__ import annotations

import logging
import os
import threading
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from benchsite.jobs.models import JobCell

logger = logging.getLogger(__name__)


class Heartbeat:
    """`with Heartbeat(rows, "cell 7"):` around the run: `rows` (still running on this
    worker) get `heartbeat_at` set on every beat."""

    def __init__(self, rows: QuerySet, what: str):
        self.rows = rows
        self.what = what
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True,
                                        name=f"heartbeat-{what.replace(' ', '-')}")

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        try:
            while not self._stop.wait(settings.BENCH_HEARTBEAT_INTERVAL):
                try:
                    self.rows.update(heartbeat_at=timezone.now())
                except DatabaseError:
                    # The server dropped this thread's connection: a new one next time.
                    logger.warning("heartbeat of %s not written", self.what, exc_info=True)
                    connection.close()
        finally:
            connection.close()  # this thread's own connection


def cell_heartbeat(cell_id: int, worker: str) -> Heartbeat:
    """The heartbeat of a job cell while it runs on `worker`."""
    return Heartbeat(JobCell.objects.filter(pk=cell_id, status=JobCell.Status.RUNNING,
                                            worker=worker), f"cell {cell_id}")


def stopped_beating(now: datetime) -> Q:
    """Rows whose heartbeat stopped: none written for BENCH_HEARTBEAT_TIMEOUT s (or none ever,
    started that long ago)."""
    stale = now - timedelta(seconds=settings.BENCH_HEARTBEAT_TIMEOUT)
    return Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True, started_at__lt=stale)


def alive_on(running_on: str, node: str) -> bool | None:
    """Whether the process a unit runs on (`running_on`: "NODE pid N") is alive, when NODE is
    `node` (this machine's); None when it runs elsewhere, where this process cannot tell."""
    here, _, pid = running_on.rpartition(" pid ")
    if here != node or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    return True
