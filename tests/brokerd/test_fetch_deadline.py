"""http_fetch has one deadline for the whole call (issue 15 item 6): a server that drips one byte at a
time, or a chain of slow redirects, cannot hold the call (and the session's turn) past timeout_s."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator

import pytest

from boxmaker.brokerd.fetch import FetchLimits, fetch

#: How long the slow server keeps going at most (bounded, so the test always ends).
DRIP_FOR_S = 6.0


class Slow(http.server.BaseHTTPRequestHandler):
    """/drip: headers, then one byte every 0.1 s; /hop/N: wait 0.4 s, then redirect to /hop/N+1;
    /late-headers: wait 3 s before anything."""

    def log_message(self, format: str, *args: object) -> None:
        del format, args

    def do_GET(self) -> None:
        if self.path == "/drip":
            self.send_response(200)
            self.send_header("content-type", "text/plain")
            self.end_headers()
            started = time.monotonic()
            try:
                while time.monotonic() - started < DRIP_FOR_S:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                return
        elif self.path.startswith("/hop/"):
            time.sleep(0.4)
            self.send_response(302)
            self.send_header("location", f"/hop/{int(self.path[5:]) + 1}")
            self.end_headers()
        elif self.path == "/late-headers":
            time.sleep(3)
            self.send_response(200)
            self.end_headers()


@pytest.fixture
def slow() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("path", ["/drip", "/hop/0", "/late-headers"])
def test_the_whole_call_ends_at_its_deadline(slow: str, path: str) -> None:
    started = time.monotonic()
    output, label = fetch(f"{slow}{path}", "web", ("127.0.0.1",), FetchLimits(timeout_s=1.0))
    took = time.monotonic() - started
    assert (output.code, output.text) == ("refused:fetch-failed", "http_fetch: no answer within 1 s")
    assert label is None
    assert took < 2.5, f"the call took {took:.1f} s against a 1 s deadline"


def test_a_fast_page_still_arrives(slow: str) -> None:
    output, _ = fetch(f"{slow}/drip", "web", ("127.0.0.1",), FetchLimits(max_bytes=5, timeout_s=5.0))
    assert output.code == "ok"
    assert "xxxxx" in output.text
