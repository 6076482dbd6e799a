"""A running cell's heartbeat: a thread of the process running it writes the time every
BENCH_HEARTBEAT_INTERVAL s, so it stops exactly when that process dies (killed pool child,
lost worker, lost machine) and the sweeper can tell (BENCH_HEARTBEAT_TIMEOUT)."""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from benchsite.jobs.models import JobCell

logger = logging.getLogger(__name__)


class Heartbeat:
    """`with Heartbeat(cell_id, worker):` around the cell's run."""

    def __init__(self, cell_id: int, worker: str):
        self.cell_id = cell_id
        self.worker = worker
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True,
                                        name=f"heartbeat-cell-{cell_id}")

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
                    JobCell.objects.filter(
                        pk=self.cell_id, status=JobCell.Status.RUNNING, worker=self.worker
                    ).update(heartbeat_at=timezone.now())
                except DatabaseError:
                    # The server dropped this thread's connection: a new one next time.
                    logger.warning("heartbeat of cell %s not written", self.cell_id,
                                   exc_info=True)
                    connection.close()
        finally:
            connection.close()  # this thread's own connection
