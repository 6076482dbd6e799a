"""Pages read from a streaming replica when one is configured (benchsite.replica).

The router's choices, per request; and a real primary with its streaming replica
(PostgreSQL's own binaries, servers of the test's own on free ports: the machine's server
allows no replication), the site uploading to the primary and, the primary stopped, serving
a run's page from the replica.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from django.http import HttpResponse
from django.test import RequestFactory

from benchsite.replica import PIN_COOKIE, ReadFromReplica, ReplicaRouter
from benchsite.results.models import Run, UploadToken

ROOT = Path(__file__).resolve().parents[1]
PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))
TOOLS = ("initdb", "pg_ctl", "pg_basebackup", "pg_isready", "postgres")


def route(request) -> tuple[str, str, str]:
    """Where the request's reads of a run, of a session and its writes go."""
    from django.contrib.sessions.models import Session

    seen = []
    router = ReplicaRouter()

    def view(request):
        seen.append((router.db_for_read(Run), router.db_for_read(Session),
                     router.db_for_write(Run)))
        return HttpResponse()

    ReadFromReplica(view)(request)
    return seen[0]


@pytest.mark.parametrize(("method", "path", "cookies", "reads"), [
    ("get", "/runs/1/", {}, "replica"),
    ("head", "/quantization/", {}, "replica"),
    ("get", "/runs/1/", {PIN_COOKIE: "1"}, "default"),  # just after the browser wrote
    ("post", "/regressions/1/triage", {}, "default"),
    ("get", "/api/v3/uploads/1", {}, "default"),
    ("get", "/admin/results/run/", {}, "default"),
    ("get", "/accounts/login/", {}, "default"),
])
def test_reads_of_read_only_pages_go_to_the_replica(method, path, cookies, reads):
    request = getattr(RequestFactory(), method)(path)
    request.COOKIES.update(cookies)
    assert route(request) == (reads, "default", "default")


def test_outside_a_request_everything_uses_the_primary():
    router = ReplicaRouter()
    assert router.db_for_read(Run) == router.db_for_write(UploadToken) == "default"
    assert router.allow_migrate("default", "results") and not router.allow_migrate(
        "replica", "results")


def test_a_write_pins_the_browser_to_the_primary():
    response = ReadFromReplica(lambda request: HttpResponse())(RequestFactory().post("/x"))
    assert response.cookies[PIN_COOKIE]["max-age"] > 0
    response = ReadFromReplica(lambda request: HttpResponse())(RequestFactory().get("/x"))
    assert PIN_COOKIE not in response.cookies


def unavailable(reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}: CI must run the replica test")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Servers:
    """PostgreSQL servers in one folder the `postgres` user owns (PostgreSQL refuses to run
    as root), each started on a free port of 127.0.0.1; `stop` takes one down at once
    (-m immediate), `remove` all of them and the folder."""

    def __init__(self):
        missing = [name for name in TOOLS if not (PG_BIN / name).exists()]
        if missing:
            unavailable(f"PostgreSQL's {', '.join(missing)} not in {PG_BIN} (set PG_BIN)")
        self.owner = None
        if os.geteuid() == 0:
            try:
                self.owner = pwd.getpwnam("postgres")
            except KeyError:
                unavailable("no `postgres` user to run PostgreSQL as (tests run as root)")
            if not shutil.which("runuser"):
                unavailable("no runuser to run PostgreSQL as `postgres` (tests run as root)")
        self.as_owner = ["runuser", "-u", "postgres", "--"] if self.owner else []
        self.root = Path(tempfile.mkdtemp(prefix="bench-replica-"))
        self.chown(self.root)
        self.ports: dict[str, int] = {}

    def chown(self, path: Path) -> None:
        if self.owner:
            os.chown(path, self.owner.pw_uid, self.owner.pw_gid)

    def run(self, tool: str, *args: str) -> None:
        done = subprocess.run([*self.as_owner, str(PG_BIN / tool), *args], cwd=self.root,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{tool} {' '.join(args)}: {done.stdout}{done.stderr}"

    def write(self, name: str, text: str, mode: str = "w") -> None:
        path = self.root / name
        with open(path, mode) as file:
            file.write(text)
        self.chown(path)

    def start(self, name: str) -> str:
        """Starts the server in folder `name`; its URL once pg_isready says it accepts."""
        port = self.ports[name] = free_port()
        self.run("pg_ctl", "start", "-D", name, "-l", f"{name}.log", "-W",
                 "-o", f"-p {port}")
        deadline = time.monotonic() + 30
        while subprocess.run([PG_BIN / "pg_isready", "-q", "-h", "127.0.0.1", "-p", str(port)],
                             timeout=10).returncode != 0:
            if time.monotonic() > deadline:
                log = (self.root / f"{name}.log").read_text()
                pytest.fail(f"PostgreSQL {name} did not start on port {port}:\n{log}")
            time.sleep(0.1)
        return f"postgres://postgres@127.0.0.1:{port}/postgres"

    def stop(self, name: str) -> None:
        subprocess.run([*self.as_owner, str(PG_BIN / "pg_ctl"), "stop", "-D", name,
                        "-m", "immediate"], cwd=self.root, capture_output=True, timeout=60)

    def remove(self) -> None:
        for name in self.ports:
            self.stop(name)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def primary_and_replica():
    """A primary (WAL for replicas, replication allowed from 127.0.0.1) and a streaming
    replica of it made by pg_basebackup -R: their URLs, and the servers."""
    servers = Servers()
    try:
        servers.run("initdb", "-D", "primary", "-U", "postgres", "-A", "trust", "-E", "UTF8",
                    "--locale=C", "--no-sync", "--no-instructions")
        servers.write("primary/pg_hba.conf", "local all all trust\n"
                      "host all all 127.0.0.1/32 trust\n"
                      "host replication all 127.0.0.1/32 trust\n")
        servers.write("primary/postgresql.conf", "listen_addresses = '127.0.0.1'\n"
                      f"unix_socket_directories = '{servers.root}'\n"
                      "wal_level = replica\nmax_wal_senders = 4\n"
                      "fsync = off\nsynchronous_commit = off\n", mode="a")
        primary = servers.start("primary")
        servers.run("pg_basebackup", "-h", "127.0.0.1", "-p", str(servers.ports["primary"]),
                    "-U", "postgres", "-D", "replica", "-R", "-X", "stream",
                    "--checkpoint=fast", "--no-sync")
        replica = servers.start("replica")
        yield primary, replica, servers
    finally:
        servers.remove()


def site(step: str, *args: str, primary: str, replica: str) -> dict:
    """tests.replica_site's step in a fresh process (the settings read from its environment)."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "benchsite.settings",
           "DATABASE_URL": primary, "DATABASE_REPLICA_URL": replica,
           "BENCH_VAR_DIR": tempfile.mkdtemp(prefix="bench-replica-var-"),
           "SECRET_KEY": "replica-test", "ALLOWED_HOSTS": "testserver",
           "BENCH_DETECT_ON_UPLOAD": "false", "LOG_LEVEL": "WARNING"}
    done = subprocess.run([sys.executable, "-m", "tests.replica_site", step, *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    shutil.rmtree(env["BENCH_VAR_DIR"], ignore_errors=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.replica
def test_pages_read_from_a_streaming_replica(primary_and_replica):
    primary, replica, servers = primary_and_replica
    uploaded = site("upload", primary=primary, replica=replica)
    servers.stop("primary")
    seen = site("read", str(uploaded["run"]), uploaded["token"], primary=primary,
                replica=replica)
    # The page's reads went to the replica: the primary is down.
    assert seen["page"] == 200 and seen["shows_run"], seen
    # The upload's went to the primary (the replica would have refused it as read-only).
    assert seen["upload"].startswith("OperationalError") and "read-only" not in seen["upload"]
