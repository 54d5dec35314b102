"""brokerd's process: the lock, the two sockets, signals (DESIGN 7 and 10.1).

Start-up order: take the home's broker lock (``broker/.lock``; a second brokerd on the same home
fails at once, saying so), create ``broker/`` (0700), check what it owns there (`startcheck`: damage
is named in one sentence, and brokerd starts anyway), read the grants once, then bind the loop and
admin sockets, so a socket appears only once brokerd can answer. Problems in ``grants/`` do not stop
the start: brokerd serves in the fail-closed state (``grants-invalid``). SIGTERM and SIGINT remove the
sockets and release the lock.
"""

from __future__ import annotations

import logging
import threading

from boxmaker.brokerd.admin import describe
from boxmaker.brokerd.config import Config
from boxmaker.brokerd.service import ADMIN_KINDS, LOOP_KINDS, Brokerd
from boxmaker.proto import fsio, homecheck
from boxmaker.proto.daemon import serve_until_signal
from boxmaker.proto.errors import BoxmakerError
from boxmaker.proto.fsio import FileLock, LockHeld
from boxmaker.proto.home import ensure_home
from boxmaker.proto.sockpath import check_socket_path
from boxmaker.proto.wire import FrameServer, stop_all

log = logging.getLogger("boxmaker.brokerd")

#: How long a connection may stay open: a call of an `ask` grant waits for the owner.
_SLACK_S = 60.0


class StartFailed(BoxmakerError):
    """Raised when brokerd cannot start; the sentence says why (runbook brokerd-start-failed)."""

    runbook = "brokerd-start-failed"

    def __init__(self, why: str, runbook: str = "brokerd-start-failed") -> None:
        super().__init__(f"brokerd cannot start: {why} (runbook: {runbook})")


class Server:
    """brokerd running: its lock, service and sockets."""

    def __init__(self, config: Config, broker: Brokerd | None = None) -> None:
        self.config = config
        self.broker = broker or Brokerd(config)
        self.lock = FileLock(config.layout.broker_lock)
        timeout = config.approval_timeout_s + _SLACK_S
        self.sockets = [
            FrameServer(config.loop_socket, self.broker.handle, LOOP_KINDS, timeout, config.limits),
            FrameServer(config.admin_socket, self.broker.handle, ADMIN_KINDS, limits=config.limits),
        ]

    def start(self) -> None:
        """Everything up to serving.

        Raises:
            StartFailed: with the reason; nothing is left behind (no socket, no lock).
        """
        unsafe = homecheck.check_brokerd(self.config.layout)  # once per start, before any socket
        if unsafe is not None:
            raise StartFailed(unsafe.what, runbook=unsafe.runbook)
        try:
            for server in self.sockets:
                check_socket_path(server.path)
            ensure_home(self.config.home)
            fsio.ensure_dir(self.config.layout.broker)
            self.lock.acquire()
        except LockHeld as exc:
            holder = fsio.lock_holder(exc.path)
            who = f" (pid {holder})" if holder else ""
            raise StartFailed(f"another brokerd{who} already runs for this home ({exc.path})") from None
        except (BoxmakerError, OSError) as exc:
            raise StartFailed(str(exc)) from None
        try:
            self.broker.open()
            grants = self.broker.grants.current()
            (log.info if grants.valid else log.error)("grants: %s", describe(grants))
            for server in self.sockets:
                server.start()
                log.info("listening on %s", server.path)
        except (BoxmakerError, OSError) as exc:
            self.stop()
            raise StartFailed(str(exc)) from None

    def stop(self) -> None:
        """Take a checkpoint (`startcheck`; first, so once the sockets are gone only the lock is left
        to release), remove the sockets and release the lock (idempotent)."""
        if self.lock.held:
            self.broker.checkpoint()
        stop_all(self.sockets)
        self.lock.release()

    def serve_forever(self, stopping: threading.Event) -> None:
        """Block until `stopping` is set (SIGTERM or SIGINT), then stop."""
        serve_until_signal(self.stop, stopping)


def run(config: Config, stopping: threading.Event) -> None:
    """Start brokerd and serve until `stopping` is set (by SIGTERM or SIGINT, perhaps already while it
    started).

    Raises:
        StartFailed: when it cannot start.
    """
    server = Server(config)
    server.start()
    log.info("brokerd ready")
    server.serve_forever(stopping)
