"""The site against a primary and its streaming replica, in a fresh process (run by
test_replica.py with DATABASE_URL and DATABASE_REPLICA_URL set). Prints one JSON line.

`python -m tests.replica_site upload`: migrates the primary, uploads records through the API
and waits until the replica has replayed the primary's WAL; prints the run's id and the
upload token.
`python -m tests.replica_site read RUN TOKEN`: with the primary stopped, gets the run's page (200,
showing the run's model, only if its reads went to the replica) and tries an upload (which
must fail: writes go to the primary).
"""

from __future__ import annotations

import json
import sys
import time

import django

MODEL = "int8wo-1024-1024-1024"  # samples.TORCHAO's model, shown on its run's page
# The site's modules are imported inside the functions: after django.setup() (below).


def upload() -> dict:
    from django.core.management import call_command
    from django.db import connections

    from benchsite.results.models import Run, UploadToken

    call_command("migrate", verbosity=0)
    token = UploadToken(name="replica", repos=["pytorch/ao"], scopes=["upload"])
    secret = token.issue()
    token.save()
    response = post_records(secret, "a" * 40)
    assert response.status_code == 201, response.content
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()")
        (written,) = cursor.fetchone()
    deadline = time.monotonic() + 30
    with connections["replica"].cursor() as cursor:
        while True:
            cursor.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [written])
            if cursor.fetchone()[0]:
                break
            assert time.monotonic() < deadline, f"the replica has not replayed {written}"
            time.sleep(0.05)
    return {"run": Run.objects.get().pk, "token": secret}


def post_records(secret: str, sha: str):
    from django.test import Client

    from tests.results.samples import META, record

    return Client().post("/api/v3/results", json.dumps([record(**{**META, "head_sha": sha})]),
                         content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {secret}")


def read(run: int, secret: str) -> dict:
    from django.test import Client

    page = Client().get(f"/runs/{run}/")
    try:
        written = f"status {post_records(secret, 'b' * 40).status_code}"
    except Exception as error:  # noqa: BLE001 - reported for the test to judge
        written = f"{type(error).__name__}: {error}"
    return {"page": page.status_code, "shows_run": MODEL in page.content.decode(),
            "upload": written}


if __name__ == "__main__":
    django.setup()
    step, *args = sys.argv[1:]
    print(json.dumps(upload() if step == "upload" else read(int(args[0]), args[1])))
