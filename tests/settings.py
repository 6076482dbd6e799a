"""The tests' settings: the site's, with Celery tasks run in-process (eager), so a test sees
a task's effect when its call returns. Tests of the worker path point the app at a real
broker and start a worker process (tests/jobs/conftest.py: `sending_to`, `start_worker`)."""

from benchsite.settings import *  # noqa: F403

CELERY_TASK_ALWAYS_EAGER = True

# Links as a site with nothing set makes them, whatever `scripts/run` serves from this checkout.
BENCH_SITE_URL = "http://localhost:8000"

# The suite tests the site on one database, even where DATABASE_REPLICA_URL is set: a test
# mirror is a connection of its own, which does not see a test's uncommitted rows (and
# pytest-django forbids it). tests/test_replica.py runs the site with a real replica.
DATABASES.pop("replica", None)  # noqa: F405
DATABASE_ROUTERS = []
MIDDLEWARE = [name for name in MIDDLEWARE  # noqa: F405
              if name != "benchsite.replica.ReadFromReplica"]

# Static files as before any `collectstatic`: plain names served from the apps' folders, even
# in a checkout where perf/dashboard_latency.py or the Docker build collected hashed ones into
# staticfiles/ (their manifest would rename what the pages link to).
STATIC_ROOT = BASE_DIR / "var" / "tests-static"  # noqa: F405  (never collected into)
WHITENOISE_USE_FINDERS = True
