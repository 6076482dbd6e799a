"""Dashboards read from a streaming replica when one is configured (DATABASE_REPLICA_URL).

`ReadFromReplica` (a middleware, installed with the router by the settings only then) marks
a request whose reads may lag the primary: a GET or HEAD of a page, not the admin's, the
login's or the API's (API clients read what they have just written: an upload's id, a job's
state). `ReplicaRouter` sends that request's reads of the site's data (results, comparisons,
regressions, jobs, bisects, the catalog) to the replica; everything else reads and writes
the primary: sessions and users, writes, Celery tasks, management commands, migrations.

A replica lags by its replay delay, so for a few seconds after a browser's own write (a
triage, a Bisect button, a login) its pages read the primary: the write's response sets a
short-lived cookie that says so, and the redirect that follows shows what was just done.
"""

from __future__ import annotations

from contextvars import ContextVar

from django.http import HttpRequest, HttpResponse

REPLICA = "replica"
PRIMARY = "default"
# The apps whose tables the pages read; their other readers (and every writer) use the primary.
REPLICA_APPS = frozenset({"results", "comparison", "regressions", "jobs", "bisects", "catalog"})
PRIMARY_PATHS = ("/admin/", "/accounts/", "/api/")
# Well over a replica's usual replay delay (milliseconds to a second on a healthy one).
PIN_COOKIE = "bench_primary"
PIN_SECONDS = 10

reads_replica: ContextVar[bool] = ContextVar("reads_replica", default=False)


def may_read_replica(request: HttpRequest) -> bool:
    return (request.method in ("GET", "HEAD")
            and not request.path_info.startswith(PRIMARY_PATHS)
            and PIN_COOKIE not in request.COOKIES)


class ReadFromReplica:
    """Marks a read-only page request for the router, and pins a browser that wrote to the
    primary."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = reads_replica.set(may_read_replica(request))
        try:
            response = self.get_response(request)
        finally:
            reads_replica.reset(token)
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            response.set_cookie(PIN_COOKIE, "1", max_age=PIN_SECONDS, httponly=True,
                                secure=request.is_secure(), samesite="Lax")
        return response


class ReplicaRouter:
    """Reads of the site's data in a marked request: the replica; all else: the primary."""

    def db_for_read(self, model, **hints) -> str:
        if reads_replica.get() and model._meta.app_label in REPLICA_APPS:
            return REPLICA
        return PRIMARY

    def db_for_write(self, model, **hints) -> str:
        return PRIMARY

    def allow_relation(self, obj1, obj2, **hints) -> bool:
        return True  # the same rows on both

    def allow_migrate(self, db, app_label, model_name=None, **hints) -> bool:
        return db == PRIMARY  # the replica gets the schema by replication
