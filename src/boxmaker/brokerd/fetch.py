"""The ``http_fetch`` tool: one GET over http or https, with the grant's hosts checked on every hop.

Redirects are followed by hand (at most `MAX_REDIRECTS`), and each hop's scheme and host (as httpx
parses it) must be allowed by the grant's `hosts`; a grant without hosts allows none. The body is cut
at `max_bytes` and the output says so. `FetchLimits.timeout_s` is one deadline for the whole call,
redirects and the body included (issue 15 item 6): each hop gets what is left of it, and a watchdog
shuts the connection when it passes, so a server sending one byte a second cannot hold the call.
Proxy variables and ``.netrc`` are not used. What the page says is always untrusted: the runtime's
own label is (public, untrusted), made stricter by the grant's.
"""

from __future__ import annotations

import codecs
import contextlib
import socket
import threading
import time
from dataclasses import dataclass

import httpx

from boxmaker.brokerd.grants import HOST
from boxmaker.brokerd.policy import host_allowed
from boxmaker.brokerd.runtime import Output
from boxmaker.brokerd.sentences import Code
from boxmaker.proto.labels import DataClass, Label

MAX_REDIRECTS = 5

#: The label of anything fetched from the web.
FETCHED = Label(DataClass.PUBLIC, True)


@dataclass(frozen=True, slots=True)
class FetchLimits:
    """The body's cap in bytes and the deadline of the whole call in seconds."""

    max_bytes: int = 2_000_000
    timeout_s: float = 20.0


def _hop_problem(url: httpx.URL, grant_id: str, hosts: tuple[str, ...]) -> str | None:
    if url.scheme not in ("http", "https"):
        return f"http_fetch follows only http and https, not {url.scheme or 'a relative URL'}"
    host = url.host.lower().rstrip(".")
    port = url.port or {"http": 80, "https": 443}.get(url.scheme)
    if not hosts or not host_allowed(host, hosts, port):
        shown = host if HOST.match(host) else "a host that is not a plain host name"
        return f"the grant {grant_id} does not allow the host {shown}"
    return None


def fetch(
    url: str,
    grant_id: str,
    hosts: tuple[str, ...],
    limits: FetchLimits,
    transport: httpx.BaseTransport | None = None,
) -> tuple[Output, Label | None]:
    """GET `url`; the output is the status line, the content type, a blank line and the text.

    Refusals (a hop to a host the grant does not allow: ``refused:denied``; a network failure or
    timeout: ``refused:fetch-failed``) carry no label and quote none of the server's text.
    """
    try:
        target = httpx.URL(url)
    except (httpx.InvalidURL, ValueError):
        return Output("http_fetch: the url is not a URL", Code.INVALID_ARGUMENTS), None
    deadline = time.monotonic() + limits.timeout_s
    late = Output(f"http_fetch: no answer within {limits.timeout_s:g} s", Code.FETCH_FAILED)
    with httpx.Client(follow_redirects=False, trust_env=False, transport=transport) as client:
        for _ in range(MAX_REDIRECTS + 1):
            problem = _hop_problem(target, grant_id, hosts)
            if problem:
                return Output(problem, Code.DENIED), None
            left = deadline - time.monotonic()
            if left <= 0:
                return late, None
            try:
                with client.stream("GET", target, timeout=left) as response:
                    location = response.headers.get("location")
                    if response.is_redirect and location:
                        target = response.url.join(location)
                        continue
                    page = _page(response, limits.max_bytes, deadline)
                    return (page, FETCHED) if page is not None else (late, None)
            except httpx.TimeoutException:
                return late, None
            except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
                if time.monotonic() >= deadline:
                    return late, None
                return Output(f"http_fetch failed: {type(exc).__name__}", Code.FETCH_FAILED), None
    return Output(f"http_fetch: more than {MAX_REDIRECTS} redirects", Code.FETCH_FAILED), None


def _shut(response: httpx.Response) -> None:
    """The watchdog: shut the response's connection, so a read blocked on it returns at once."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _page(response: httpx.Response, max_bytes: int, deadline: float) -> Output | None:
    """The page as the model reads it, or None when the body did not arrive before `deadline`."""
    body = bytearray()
    fired = threading.Event()

    def on_deadline() -> None:
        fired.set()
        _shut(response)

    watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), on_deadline)
    watchdog.daemon = True
    watchdog.start()
    try:
        for chunk in response.iter_bytes():
            body += chunk
            if fired.is_set() or time.monotonic() >= deadline:
                return None
            if len(body) > max_bytes:
                break
    finally:
        watchdog.cancel()
    if fired.is_set():
        return None
    cut = len(body) > max_bytes
    text = _decode(bytes(body[:max_bytes]), response.charset_encoding)
    head = f"HTTP {response.status_code} {response.reason_phrase}\nurl: {response.url}"
    kind = response.headers.get("content-type", "")
    lines = [head, f"content-type: {kind}" if kind else "content-type: (none)", "", text]
    if cut:
        lines.append(f"\n[cut at {max_bytes:,} bytes]")
    return Output("\n".join(lines))


def _decode(data: bytes, charset: str | None) -> str:
    try:
        codecs.lookup(charset or "utf-8")
    except LookupError:
        charset = "utf-8"
    return data.decode(charset or "utf-8", errors="replace")
