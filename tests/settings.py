"""The tests' settings: the site's, with Celery tasks run in-process (eager), so a test sees
a task's effect when its call returns. Tests of the worker path point the app at a real
broker and start a worker process (tests/jobs/conftest.py: `sending_to`, `start_worker`)."""

from benchsite.settings import *  # noqa: F403

CELERY_TASK_ALWAYS_EAGER = True
