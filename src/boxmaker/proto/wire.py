"""Unix-socket servers and clients speaking frames (DESIGN 3 and 10.1; M5a section 7).

`FrameServer` serves one socket: it makes the 0700 folder and removes a stale socket (one nobody
answers on; `sockpath.prepare_socket_path`), binds, sets 0600 before listening, and answers each
connection's one request on its own thread.
A bad frame or message gets an `error` reply and the server keeps serving. What it serves at once is
bounded (`Limits`, a role's ``[limits]``): at most ``connections`` connections have a thread; one more
is answered at once, without a thread, with an `error` frame of code ``busy`` and closed; a connection
that has not sent its whole request within ``idle_s`` seconds is dropped. The listen backlog is the
system's largest (`listen_backlog`), so a burst of connects waits in the kernel instead of failing.
`FrameServer.stop` returns within a few seconds whatever is open.

`call` is the client: one request, one reply, with a timeout; a ``busy`` answer is asked again with
back-off until the timeout, so a cap never fails a caller that can wait. A reply may be preceded by
interim frames (`messages.INTERIM_KINDS`, such as `chat_delta`), handed to the caller's `on_interim`. A
handler reaches the connection it answers through `exchange()`, to send such frames and to see the
client hang up.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import select
import selectors
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from boxmaker.proto import frame, messages
from boxmaker.proto.errors import FrameTooLarge, FrameTruncated, PeerError, ProtocolError
from boxmaker.proto.messages import Body, Error
from boxmaker.proto.sockpath import SocketPathError, check_socket_path, listen_backlog, prepare_socket_path

#: The `error` code of a connection past a socket's cap, and its runbook entry.
BUSY = "busy"
BUSY_RUNBOOK = "socket-busy"
#: A client's first pause after ``busy``, and its longest, in seconds (doubled each time, with jitter).
BUSY_FIRST_S = 0.02
BUSY_MAX_S = 1.0
#: How long `FrameServer.stop` waits for requests being answered, in seconds.
STOP_GRACE_S = 2.0
#: At most one log line per this many seconds about connections refused as busy.
_BUSY_LOG_S = 10.0

Handler = Callable[[str, Body], Body]

log = logging.getLogger("boxmaker.wire")


@dataclass(frozen=True, slots=True)
class Limits:
    """What one socket serves at once (a role's ``[limits]``; docs/configuration.md).

    Attributes:
        connections: connections with a thread at the same time; one more gets an `error` frame of
            code ``busy`` (runbook socket-busy) and is closed.
        idle_s: seconds a connection may take to send its whole request before it is dropped.
    """

    connections: int = 64
    idle_s: float = 10.0


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


def busy_error(path: Path, limits: Limits) -> Error:
    """The `error` frame a connection past the cap gets."""
    return Error(
        code=BUSY,
        message=f"{path} is serving {limits.connections} connections, its limit ([limits] connections); "
        "try again in a moment",
        runbook=BUSY_RUNBOOK,
    )


class FrameServer:
    """Serve one Unix socket: one framed request per connection, answered by `handler`.

    Args:
        path: the socket path.
        handler: called as ``handler(kind, body)`` for each valid request; returns the reply
            body. It may raise `ProtocolError` (sent as an `error` reply); any other exception is
            logged and answered with an `internal` error.
        accept: the message kinds this socket takes; others get an `unknown-kind` error.
        timeout: seconds sending the reply may take.
        limits: the cap on connections and the idle deadline (`Limits`).
    """

    def __init__(
        self,
        path: Path,
        handler: Handler,
        accept: frozenset[str],
        timeout: float = 30.0,
        limits: Limits | None = None,
    ) -> None:
        self.path = path
        self.handler = handler
        self.accept = accept
        self.timeout = timeout
        self.limits = limits or Limits()
        self._listener: socket.socket | None = None
        self._wake: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()
        self._guard = threading.Condition()
        #: Each open connection: True while its request is still being read, False once answered.
        self._open: dict[socket.socket, bool] = {}
        self._refused = 0
        self._refused_said = 0.0

    def start(self) -> None:
        """Bind, set 0600, listen with the system's largest backlog, and accept on a background thread.

        Raises:
            SocketPathError, SocketInUse: see `prepare_socket_path`.
            OSError: when binding fails.
        """
        prepare_socket_path(self.path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(self.path))
            os.chmod(self.path, 0o600)
            listener.listen(listen_backlog())
            listener.setblocking(False)
        except BaseException:
            listener.close()
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(self.path.lstat().st_mode):
                    self.path.unlink()
            raise
        wake = os.pipe()
        os.set_blocking(wake[0], False)
        self._closing.clear()
        self._listener, self._wake = listener, wake
        self._thread = threading.Thread(
            target=self._accept_loop, args=(listener, wake[0]), name=f"accept {self.path.name}", daemon=True
        )
        self._thread.start()

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        """Stop accepting, remove the socket file, drop connections still sending their request, and
        wait up to `grace` seconds for the ones being answered (idempotent)."""
        self.close()
        self.drain(time.monotonic() + grace)

    def close(self) -> None:
        """Stop accepting, close the socket, remove its file, and drop every connection whose
        request has not arrived yet (idempotent)."""
        listener, self._listener = self._listener, None
        if listener is None:
            return
        self._closing.set()
        wake, self._wake = self._wake, None
        if wake is not None:
            with contextlib.suppress(OSError):
                os.write(wake[1], b"x")
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        listener.close()
        if wake is not None:
            for fd in wake:
                with contextlib.suppress(OSError):
                    os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        with self._guard:
            for conn, reading in self._open.items():
                if reading:
                    with contextlib.suppress(OSError):
                        conn.shutdown(socket.SHUT_RDWR)

    def drain(self, deadline: float) -> None:
        """Wait until every connection is answered, or until `deadline` (`time.monotonic`)."""
        with self._guard:
            while self._open:
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning(
                        "stopping with %d request(s) still being answered on %s", len(self._open), self.path
                    )
                    return
                self._guard.wait(left)

    @property
    def open_connections(self) -> int:
        """How many connections have a thread now."""
        with self._guard:
            return len(self._open)

    def _accept_loop(self, listener: socket.socket, wake: int) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(listener, selectors.EVENT_READ)
            selector.register(wake, selectors.EVENT_READ)
            while True:
                events = selector.select()
                if any(key.fileobj == wake for key, _ in events):
                    return
                self._accept_waiting(listener)

    def _accept_waiting(self, listener: socket.socket) -> None:
        while not self._closing.is_set():
            try:
                conn, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of file descriptors: the connects wait in the backlog
                log.warning("cannot accept on %s: %s", self.path, exc.strerror or exc)
                time.sleep(0.1)
                return
            self._admit(conn)

    def _admit(self, conn: socket.socket) -> None:
        with self._guard:
            full = len(self._open) >= self.limits.connections
            if not full:
                self._open[conn] = True
        if not full:
            try:
                threading.Thread(target=self._serve, args=(conn,), daemon=True).start()
                return
            except RuntimeError:  # no thread to be had: the same answer as a full cap
                self._forget(conn)
        self._refuse_busy(conn)

    def _refuse_busy(self, conn: socket.socket) -> None:
        try:
            conn.setblocking(False)
            conn.send(frame.pack(messages.encode(busy_error(self.path, self.limits))))
        except OSError:
            pass
        finally:
            conn.close()
        self._refused += 1
        now = time.monotonic()
        if now - self._refused_said >= _BUSY_LOG_S:
            log.warning(
                "busy: %d connection(s) refused on %s past its limit of %d ([limits] connections)",
                self._refused,
                self.path,
                self.limits.connections,
            )
            self._refused, self._refused_said = 0, now

    def _serve(self, conn: socket.socket) -> None:
        try:
            self.serve_connection(conn)
        except Exception:
            log.exception("connection on %s failed", self.path)
        finally:
            conn.close()
            self._forget(conn)

    def _forget(self, conn: socket.socket) -> None:
        with self._guard:
            self._open.pop(conn, None)
            self._guard.notify_all()

    def serve_connection(self, conn: socket.socket) -> None:
        """Read one request from `conn` within the idle deadline, answer it, and return (the caller
        closes `conn`)."""
        try:
            payload = frame.recv_frame(conn, time.monotonic() + self.limits.idle_s)
        except FrameTooLarge as exc:
            self._reply(conn, _error(exc))
            return
        except FrameTruncated as exc:
            if exc.got or exc.wanted != 4:  # a frame cut short: say so, if anyone still listens
                self._reply(conn, _error(exc))
            return
        except ProtocolError as exc:
            self._reply(conn, _error(exc))
            return
        except OSError as exc:
            log.debug("connection on %s dropped while reading: %s", self.path, exc)
            return
        with self._guard:
            if conn in self._open:
                self._open[conn] = False
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
            conn.settimeout(self.timeout)
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


def stop_all(servers: Iterable[FrameServer], grace: float = STOP_GRACE_S) -> None:
    """Stop several sockets at once: all stop accepting first, then one shared `grace` for their
    requests being answered."""
    servers = list(servers)
    for server in servers:
        server.close()
    deadline = time.monotonic() + grace
    for server in servers:
        server.drain(deadline)


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
    """Send one request on the socket at `path` and return the reply body; a ``busy`` answer (the
    socket's cap is reached; nothing was done) is asked again with back-off while `timeout` allows.
    `on_interim` gets each interim frame (`messages.INTERIM_KINDS`) that comes before the reply
    (`timeout` then applies to each).

    Raises:
        PeerError: code "unreachable" when nothing answers at `path` (or it times out); the
            peer's own code, sentence and runbook when it replies with an `error` frame (``busy``
            when it stayed busy until the timeout); "bad-reply" when the reply cannot be decoded.
    """
    try:
        check_socket_path(path)
    except SocketPathError as exc:
        raise PeerError("unreachable", str(exc)) from None
    deadline = time.monotonic() + timeout
    pause = BUSY_FIRST_S
    while True:
        reply = _exchange(path, body, deadline, timeout, on_interim)
        if not (isinstance(reply, Error) and reply.code == BUSY):
            break
        if time.monotonic() + pause >= deadline:
            break
        time.sleep(pause * random.uniform(0.5, 1.0))
        pause = min(pause * 2, BUSY_MAX_S)
    if isinstance(reply, Error):
        raise PeerError(reply.code, reply.message, reply.runbook)
    return reply


def _exchange(
    path: Path,
    body: Body,
    deadline: float,
    timeout: float,
    on_interim: Callable[[Body], None] | None = None,
) -> Body:
    """One connection: send `body`, read the reply (also after a send the server cut short: a
    ``busy`` answer is sent before the request is read)."""
    sock = _connect(path, deadline)
    try:
        try:
            frame.send_frame(sock, messages.encode(body))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered without reading: its answer is still there to read
        except TimeoutError:
            raise PeerError("unreachable", f"no answer at {path} within {timeout:g} s") from None
        except OSError as exc:
            raise PeerError("unreachable", f"connection to {path} failed ({exc})") from None
        payload = _receive(sock, path, timeout)
        while on_interim is not None and (interim := _interim(payload)) is not None:
            on_interim(interim)
            payload = _receive(sock, path, timeout)
    finally:
        sock.close()
    try:
        _, reply = messages.decode(payload)
    except ProtocolError as exc:
        raise PeerError("bad-reply", f"bad reply from {path}: {exc.message}") from None
    return reply


def _receive(sock: socket.socket, path: Path, timeout: float) -> bytes:
    try:
        return frame.recv_frame(sock)
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
