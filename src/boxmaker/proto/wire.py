"""Unix-socket servers and clients speaking frames (DESIGN 3 and 10.1; M5a section 7).

`FrameServer` serves one socket: it makes the 0700 folder, removes a stale socket (one nobody answers
on), binds, sets 0600 before listening, and answers each connection's one request on its own thread.
A bad frame or message gets an `error` reply and the server keeps serving.

`call` is the client: one request, one reply, with a timeout; a reply may be preceded by interim frames
(`messages.INTERIM_KINDS`, such as `chat_delta`), handed to the caller's `on_interim`. A handler reaches
the connection it answers through `exchange()`, to send such frames and to see the client hang up.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import socketserver
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

from boxmaker.proto import frame, fsio, messages
from boxmaker.proto.errors import BoxmakerError, FrameTooLarge, FrameTruncated, PeerError, ProtocolError
from boxmaker.proto.messages import Body, Error

#: The longest socket path the platform takes, in bytes (Linux `sun_path` minus the NUL).
MAX_SOCKET_PATH = 107

Handler = Callable[[str, Body], Body]

log = logging.getLogger("boxmaker.wire")


class SocketInUse(BoxmakerError):
    """Raised when another live process already answers on a socket path."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"another process is already serving {path}")


class SocketPathError(BoxmakerError):
    """Raised when a socket path is too long for the platform or is occupied by a non-socket."""


class Exchange:
    """The connection one request arrived on, for a handler that sends frames before its reply or
    must know whether the client is still there."""

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn

    def send(self, body: Body) -> bool:
        """Send one frame now; False when the client has gone (or the frame cannot be sent)."""
        try:
            frame.send_frame(self._conn, messages.encode(body))
        except (OSError, FrameTooLarge):
            return False
        return True

    def gone(self) -> bool:
        """True when the client closed its end (it sends nothing after its request)."""
        try:
            readable, _, _ = select.select([self._conn], [], [], 0)
            return bool(readable) and self._conn.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True


_answering = threading.local()


def exchange() -> Exchange | None:
    """The connection of the request this thread is answering; None outside a `FrameServer` handler."""
    found: Exchange | None = getattr(_answering, "exchange", None)
    return found


def check_socket_path(path: Path) -> None:
    """Refuse a path the platform cannot bind.

    Raises:
        SocketPathError: when the path is longer than `MAX_SOCKET_PATH` bytes.
    """
    size = len(os.fsencode(str(path)))
    if size > MAX_SOCKET_PATH:
        raise SocketPathError(
            f"socket path {path} is {size} bytes, over the platform's limit of {MAX_SOCKET_PATH}; "
            "use a shorter home or set the socket path in the config"
        )


def prepare_socket_path(path: Path) -> None:
    """Make the socket's 0700 folder and remove a stale socket at `path`.

    Raises:
        SocketPathError: the path is too long, or something that is not a socket is there.
        SocketInUse: a live process answers on it.
    """
    check_socket_path(path)
    fsio.ensure_dir(path.parent)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise SocketPathError(f"{path} exists and is not a socket; move it away")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
    except OSError:
        path.unlink(missing_ok=True)
        return
    finally:
        probe.close()
    raise SocketInUse(path)


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = False
    request_queue_size = 256  # connections waiting to be accepted (the default 5 refuses bursts)

    def __init__(self, path: Path, owner: FrameServer) -> None:
        self.owner = owner
        super().__init__(str(path), _RequestHandler, bind_and_activate=False)

    def server_bind(self) -> None:
        self.socket.bind(self.server_address)
        os.chmod(self.owner.path, 0o600)


class _RequestHandler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        self.server.owner.serve_connection(self.request)


class FrameServer:
    """Serve one Unix socket: one framed request per connection, answered by `handler`.

    Args:
        path: the socket path.
        handler: called as ``handler(kind, body)`` for each valid request; returns the reply
            body. It may raise `ProtocolError` (sent as an `error` reply); any other exception is
            logged and answered with an `internal` error.
        accept: the message kinds this socket takes; others get an `unknown-kind` error.
        timeout: seconds a connection may take to send its request.
    """

    def __init__(self, path: Path, handler: Handler, accept: frozenset[str], timeout: float = 30.0) -> None:
        self.path = path
        self.handler = handler
        self.accept = accept
        self.timeout = timeout
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Bind, set 0600, listen, and serve on a background thread.

        Raises:
            SocketPathError, SocketInUse: see `prepare_socket_path`.
            OSError: when binding fails.
        """
        prepare_socket_path(self.path)
        server = _Server(self.path, self)
        try:
            server.server_bind()
            server.server_activate()
        except BaseException:
            server.server_close()
            raise
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting, close the socket and remove its file."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def serve_connection(self, conn: socket.socket) -> None:
        """Read one request from `conn`, answer it, and return (the caller closes `conn`)."""
        conn.settimeout(self.timeout)
        try:
            payload = frame.recv_frame(conn)
        except FrameTooLarge as exc:
            self._reply(conn, _error(exc))
            return
        except ProtocolError as exc:
            self._reply(conn, _error(exc))  # a frame cut short: say so, if anyone still listens
            return
        except OSError as exc:
            log.info("connection on %s failed while reading: %s", self.path, exc)
            return
        _answering.exchange = Exchange(conn)
        try:
            self._reply(conn, self.answer(payload))
        finally:
            _answering.exchange = None

    def answer(self, payload: bytes) -> Body:
        """The reply body for one request payload (no socket involved)."""
        try:
            kind, body = messages.decode(payload, self.accept)
            return self.handler(kind, body)
        except ProtocolError as exc:
            return _error(exc)
        except Exception:
            log.exception("internal error while answering on %s", self.path)
            return Error(code="internal", message="internal error; see the role's log", runbook="")

    def _reply(self, conn: socket.socket, body: Body) -> None:
        try:
            frame.send_frame(conn, messages.encode(body))
        except FrameTooLarge as exc:
            with contextlib.suppress(OSError):
                frame.send_frame(conn, messages.encode(_error(exc)))
        except OSError as exc:
            log.info("could not send the reply on %s: %s", self.path, exc)


def _interim(payload: bytes) -> Body | None:
    """The body of an interim frame, else None (the reply, read by the caller)."""
    try:
        kind, body = messages.decode(payload, messages.INTERIM_KINDS)
    except ProtocolError:
        return None
    return body if kind in messages.INTERIM_KINDS else None


def _error(exc: ProtocolError) -> Error:
    return Error(code=exc.code, message=exc.message, runbook=exc.runbook)


def _connect(path: Path, deadline: float) -> socket.socket:
    """Connect to `path`, waiting while the server's queue of connections is full.

    Raises:
        PeerError: code "unreachable" when nothing listens there, or it stays busy until `deadline`.
    """
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        try:
            sock.connect(str(path))
            return sock
        except (BlockingIOError, InterruptedError):
            sock.close()  # the listen queue is full: the server is busy, not gone
            if time.monotonic() >= deadline:
                raise PeerError("unreachable", f"{path} stayed busy until the timeout") from None
            time.sleep(0.005)
        except OSError as exc:
            sock.close()
            raise PeerError("unreachable", f"nothing answers at {path} ({exc.strerror or exc})") from None


def call(
    path: Path, body: Body, timeout: float = 30.0, on_interim: Callable[[Body], None] | None = None
) -> Body:
    """Send one request on the socket at `path` and return the reply body; `on_interim` gets each
    interim frame (`messages.INTERIM_KINDS`) that comes before it (`timeout` then applies to each).

    Raises:
        PeerError: code "unreachable" when nothing answers at `path` (or it times out); the
            peer's own code, sentence and runbook when it replies with an `error` frame;
            "bad-reply" when the reply cannot be decoded.
    """
    try:
        check_socket_path(path)
    except SocketPathError as exc:
        raise PeerError("unreachable", str(exc)) from None
    deadline = time.monotonic() + timeout
    sock = _connect(path, deadline)
    try:
        try:
            frame.send_frame(sock, messages.encode(body))
            payload = frame.recv_frame(sock)
            while on_interim is not None and (interim := _interim(payload)) is not None:
                on_interim(interim)
                payload = frame.recv_frame(sock)
        except TimeoutError:
            raise PeerError("unreachable", f"no answer at {path} within {timeout:g} s") from None
        except OSError as exc:
            raise PeerError("unreachable", f"connection to {path} failed ({exc})") from None
        except FrameTruncated as exc:
            if exc.got == 0 and exc.wanted == 4:
                raise PeerError(
                    "unreachable", f"{path} closed the connection before answering (stopped?)"
                ) from None
            raise PeerError("bad-reply", f"bad reply from {path}: {exc.message}") from None
        except ProtocolError as exc:
            raise PeerError("bad-reply", f"bad reply from {path}: {exc.message}") from None
    finally:
        sock.close()
    try:
        _, reply = messages.decode(payload)
    except ProtocolError as exc:
        raise PeerError("bad-reply", f"bad reply from {path}: {exc.message}") from None
    if isinstance(reply, Error):
        raise PeerError(reply.code, reply.message, reply.runbook)
    return reply
