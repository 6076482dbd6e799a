"""`python -m runner upload` against a server that breaks transfers (no Django)."""

from __future__ import annotations

import gzip
import json
import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from runner.cli import main
from runner.cli.upload import retry_after

RUN = ["--repo", "pytorch/ao", "--head-branch", "main", "--head-sha", "a" * 40]


class Flaky(BaseHTTPRequestHandler):
    """Answers each file (told apart by its content, `[{"file": NAME}]`) by a script of
    behaviours, one per attempt (the last one repeats)."""

    scripts: dict[str, list[str]] = {}
    seen: dict[str, list[str]] = defaultdict(list)  # name -> Idempotency-Keys received

    def do_POST(self):
        body = gzip.decompress(self.rfile.read(int(self.headers["Content-Length"])))
        name = json.loads(body)[0]["file"]
        self.seen[name].append(self.headers["Idempotency-Key"])
        script = self.scripts[name]
        behaviour = script[min(len(self.seen[name]), len(script)) - 1]
        if behaviour == "cut":  # promises more than it sends: http.client.IncompleteRead
            self.send_response(201)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b'{"upload_id"')
        elif behaviour == "reset":
            self.connection.shutdown(2)
        elif behaviour in ("429", "500", "503"):
            self.send_response(int(behaviour))
            self.send_header("Retry-After", "0")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")
        else:
            body = json.dumps({"upload_id": 7, "records": 1, "created": True}).encode()
            self.send_response(201)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    Flaky.seen.clear()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_broken_transfers_are_retried_and_every_file_is_tried(server, tmp_path, capsys,
                                                               monkeypatch):
    Flaky.scripts = {"cut": ["cut", "reset", "429", "503", "ok"], "down": ["500"],
                     "fine": ["ok"]}
    for name in Flaky.scripts:
        (tmp_path / f"{name}.json").write_text(f'[{{"file": "{name}"}}]')
    monkeypatch.chdir(tmp_path)
    assert main(["upload", "cut.json", "down.json", "fine.json", "--server", server,
                 "--token", "t", "--retries", "4", "--backoff", "0", *RUN]) == 1
    out, err = capsys.readouterr()
    assert len(Flaky.seen["cut"]) == 5 and len(set(Flaky.seen["cut"])) == 1  # one key
    assert "cut.json: stored as upload 7" in out and "fine.json: stored as upload 7" in out
    assert len(Flaky.seen["down"]) == 5 and len(Flaky.seen["fine"]) == 1
    assert "down.json: " in err and "gave up after 5 attempts: HTTP 500" in err
    assert err.strip().endswith("1 of 3 files not uploaded: down.json")


def test_a_response_cut_short_every_time_is_reported(server, tmp_path, capsys, monkeypatch):
    Flaky.scripts = {"a": ["cut"]}
    (tmp_path / "a.json").write_text('[{"file": "a"}]')
    monkeypatch.chdir(tmp_path)
    assert main(["upload", "a.json", "--server", server, "--token", "t", "--retries", "2",
                 "--backoff", "0", *RUN]) == 1
    err = capsys.readouterr().err
    assert "gave up after 3 attempts: IncompleteRead" in err
    assert len(Flaky.seen["a"]) == 3


def test_retry_after_is_honoured_within_bounds():
    assert (retry_after("5"), retry_after(None), retry_after("soon"), retry_after("-3"),
            retry_after("99999")) == (5.0, 0.0, 0.0, 0.0, 300.0)


def test_the_next_file_is_prepared_while_one_is_sent_and_a_missing_one_is_reported(
        server, tmp_path, capsys, monkeypatch):
    from runner.cli import upload

    Flaky.scripts = {"one": ["ok"], "three": ["ok"]}
    for name in Flaky.scripts:
        (tmp_path / f"{name}.json").write_text(f'[{{"file": "{name}"}}]')
    monkeypatch.chdir(tmp_path)
    prepared, sending = [], []
    real_prepare, real_send = upload.prepare, upload.send

    def watched_prepare(body, *args):
        prepared.append(json.loads(body)[0]["file"])
        return real_prepare(body, *args)

    def watched_send(ready, **options):
        name = json.loads(gzip.decompress(ready.compressed))[0]["file"]
        sending.append((name, list(prepared)))
        return real_send(ready, **options)

    monkeypatch.setattr(upload, "prepare", watched_prepare)
    monkeypatch.setattr(upload, "send", watched_send)
    assert main(["upload", "one.json", "two.json", "three.json", "--server", server,
                 "--token", "t", "--backoff", "0", *RUN]) == 1
    # (a file is read before its send starts: "one" alone may be ready when it is sent)
    assert sending[0][0] == "one" and sending[1] == ("three", ["one", "three"])
    out, err = capsys.readouterr()
    assert "one.json: stored" in out and "three.json: stored" in out
    assert "two.json: [Errno 2] No such file or directory" in err
    assert err.strip().endswith("1 of 3 files not uploaded: two.json")


def test_prepared_ahead_makes_the_next_item_before_the_caller_is_done_with_this_one():
    from runner.cli.upload import prepared_ahead

    made = []
    second_made = threading.Event()

    def make(item):
        made.append(item)
        if item == 2:
            second_made.set()
        if item == 3:
            raise OSError("three is unreadable")
        return item * 10

    got = []
    for item, result in prepared_ahead([1, 2, 3, 4], make):
        if item == 1:
            assert second_made.wait(5)  # made while item 1 is in the caller's hands
        try:
            got.append(result())
        except OSError as error:
            got.append(str(error))
    assert got == [10, 20, "three is unreadable", 40] and made == [1, 2, 3, 4]
