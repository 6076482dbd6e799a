"""Peak memory of one upload request's own work, in a fresh process (run by
test_upload_limits.py): `python -m tests.results.upload_memory MiB good|bad|gzip`.

It builds a body of about MiB of records (one bad record for `bad`; gzip-compressed as the CI
client sends it for `gzip`), then resets the process's peak RSS (/proc/self/clear_refs) and
does what the upload API does with it up to the database: read the body from the WSGI
stream, decompress it, normalise it (a 400 for `bad`) and compress the payload kept. Prints
one JSON line: the body's size, the RSS before, the peak RSS and the seconds taken.
"""

from __future__ import annotations

import gc
import gzip
import json
import os
import sys
import time


def body_of(size: int, bad: bool) -> bytes:
    """About `size` bytes of torchao-style records, each of its own series."""
    template = ('{"benchmark": {"name": "micro-benchmark api", "mode": "inference", '
                '"dtype": "int8wo", "extra_info": {"device": "cuda", "arch": "H100"}}, '
                '"model": {"name": "m-%d", "type": "layer", "origins": ["torchao"]}, '
                '"metric": {"name": "speedup", "benchmark_values": [%s]}, '
                '"repo": "pytorch/ao", "head_branch": "main", "head_sha": "%s", '
                '"workflow_id": 1, "job_id": 2, "timestamp": 1760000000}')
    count = size // len(template % (0, "1.25", "a" * 40))
    records = (template % (i, '"fast"' if bad and i == count // 2 else "1.25", "a" * 40)
               for i in range(count))
    return ("[" + ",".join(records) + "]").encode()


def status(name: str) -> int:
    with open("/proc/self/status") as lines:
        for line in lines:
            if line.startswith(name + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(name)


def main(mebibytes: int, case: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    import django

    django.setup()
    from django.test import RequestFactory

    from benchsite.results.api_upload import gunzip, read_body
    from benchsite.results.ingest import mixed, parse

    body = body_of(mebibytes * 2**20, bad=case == "bad")
    sent = gzip.compress(body, compresslevel=1) if case == "gzip" else body
    size, sent_size = len(body), len(sent)
    # the body waits in the request's input stream, as a server hands it over
    request = RequestFactory().generic("POST", "/api/v3/results", sent,
                                       content_type="application/json")
    del body, sent
    gc.collect()
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # the peak RSS starts again from the RSS now
    before = status("VmRSS")
    started = time.perf_counter()
    limit = 2**40
    raw = read_body(request, limit)
    received = gunzip(raw, limit) if case == "gzip" else raw
    records, envelope = parse.split_body(received)
    normalization = mixed.Normalization(records, envelope)  # what is stored as it is read
    for _chunk in normalization.chunks():
        pass
    refused = normalization.count or None
    if case != "gzip":  # the payload kept: as sent when it was compressed
        gzip.compress(received, compresslevel=1)
    seconds = time.perf_counter() - started
    print(json.dumps({"body": size, "sent": sent_size, "rss_before": before,
                      "peak": status("VmHWM"), "seconds": seconds, "problems": refused}))


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
