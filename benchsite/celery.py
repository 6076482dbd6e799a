"""The Celery app. With no CELERY_BROKER_URL, the embedded broker `filesystem://` (a folder
under var/, no service to run; scripts/run starts its workers and beat); Redis is the
production broker. Only the tests run tasks in-process (tests/settings.py)."""

import os
from pathlib import Path

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")

app = Celery("benchsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def filesystem_broker(folder: Path) -> dict[str, object]:
    """kombu's filesystem transport options for a broker kept in `folder` (created): one file
    per message, taken by exactly one worker (a file move), and the exchanges' queue tables."""
    queue, control = folder / "queue", folder / "control"
    for path in (queue, control):
        path.mkdir(parents=True, exist_ok=True)
    return {"data_folder_in": str(queue), "data_folder_out": str(queue),
            "control_folder": str(control), "store_processed": False}
