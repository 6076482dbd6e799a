"""Web processes keep freed memory for their next request (benchsite.memory); workers do not."""

import os
import subprocess
import sys

import pytest

# A request's large blocks (an upload's body and its decompressed JSON, the COPY buffers),
# all freed at its end; the minor page faults of a request once the process has served one.
SCRIPT = """
import resource, sys
mode = sys.argv[1]
if mode == "kept":
    from benchsite.memory import keep_freed_memory
    assert keep_freed_memory()
elif mode == "web":
    import benchsite.wsgi
elif mode == "worker":
    from celery.signals import worker_init
    from benchsite.celery import app
    worker_init.send(sender=app)
def request():
    blocks = [bytearray(3 * 2**20), *(bytearray(300_000) for _ in range(30))]
    for block in blocks:
        block[::4096] = b"x" * len(block[::4096])  # touched: their pages faulted in
request()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    request()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // 5)
"""


def faults_a_request(mode: str) -> int:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    return int(subprocess.run([sys.executable, "-c", SCRIPT, mode], check=True, env=env,
                              capture_output=True, text=True).stdout)


def test_glibc_gives_freed_memory_back_by_default():
    assert faults_a_request("default") > 1000  # 12 MB given back and faulted in again


@pytest.mark.parametrize("mode", ["kept", "web"])
def test_web_processes_keep_it_for_the_next_request(mode):
    assert faults_a_request(mode) < 100


def test_workers_leave_it_as_it_was():
    """A worker times CPU benchmarks in its own process: how its memory is given back is
    part of what they measure, and it stays as every earlier result was measured with."""
    assert faults_a_request("worker") > 1000
