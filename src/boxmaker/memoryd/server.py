"""memoryd's process: the lock, the four sockets, signals (M5a sections 7 and 13; DESIGN 7, 10.1; the
MCP servers' socket: issue 17).

Start-up order: check SQLite has FTS5 (and the trigram tokenizer), take the home's lock (a second
memoryd on the same home fails at once, saying why), create missing files, complete an interrupted
edit, open and catch up the index, then bind the sockets, so a socket appears only once memoryd can
answer. SIGTERM and SIGINT remove the sockets and release the lock.
"""

from __future__ import annotations

import logging
import sqlite3
import sys
import threading

from boxmaker.memoryd.config import Config
from boxmaker.memoryd.index.schema import fts5_problem
from boxmaker.memoryd.service import ADMIN_KINDS, BROKER_KINDS, LOOP_KINDS, MCP_KINDS, Memoryd
from boxmaker.proto import heap, homecheck
from boxmaker.proto.daemon import serve_until_signal
from boxmaker.proto.errors import BoxmakerError
from boxmaker.proto.fsio import FileLock, LockHeld
from boxmaker.proto.home import ensure_home
from boxmaker.proto.sockpath import check_socket_path
from boxmaker.proto.wire import FrameServer, stop_all

#: The GIL's switch interval in the daemon, seconds (Python's default is 0.005; see `Server.start`).
SWITCH_INTERVAL = 0.0005

log = logging.getLogger("boxmaker.memoryd")


class StartFailed(BoxmakerError):
    """Raised when memoryd cannot start; the sentence says why (runbook memoryd-start-failed)."""

    runbook = "memoryd-start-failed"

    def __init__(self, why: str, runbook: str = "memoryd-start-failed") -> None:
        super().__init__(f"memoryd cannot start: {why} (runbook: {runbook})")


class Server:
    """memoryd running: its lock, service and sockets."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.service = Memoryd(config)
        self.lock = FileLock(config.layout.memory_lock)
        self.sockets = [
            FrameServer(config.loop_socket, self.service.handle, LOOP_KINDS, limits=config.limits),
            FrameServer(config.broker_socket, self.service.handle, BROKER_KINDS, limits=config.limits),
            FrameServer(config.admin_socket, self.service.handle, ADMIN_KINDS, limits=config.limits),
            FrameServer(config.mcp_socket, self.service.handle, MCP_KINDS, limits=config.limits),
        ]

    def start(self) -> None:
        """Everything up to serving.

        Raises:
            StartFailed: with the reason.
        """
        problem = fts5_problem()
        if problem:
            raise StartFailed(problem)
        unsafe = homecheck.check_memoryd(self.config.layout)  # once per start, before any socket
        if unsafe is not None:
            raise StartFailed(unsafe.what, runbook=unsafe.runbook)
        try:
            for server in self.sockets:
                check_socket_path(server.path)
            ensure_home(self.config.home)
            self.config.layout.memory.mkdir(mode=0o700, exist_ok=True)
            self.lock.acquire()
        except (BoxmakerError, OSError) as exc:
            raise StartFailed(str(exc)) from None
        log.info("SQLite %s with FTS5; home %s", sqlite3.sqlite_version, self.config.home)
        # A thread answering a request gives up the GIL at each fsync (about ten per commit) and waits for
        # it again while a background thread (the index, a large topic page) computes: at Python's 5 ms
        # switch interval that wait alone made a commit's p99 tens of ms (issue 16).
        sys.setswitchinterval(SWITCH_INTERVAL)
        heap.settle_allocator()  # large read buffers go back to the system when freed (proto.heap)
        try:
            created = self.service.open()
            if created:
                log.info("created %s", ", ".join(created))
            for server in self.sockets:
                server.start()
                log.info("listening on %s", server.path)
        except (BoxmakerError, OSError, sqlite3.Error) as exc:
            self.stop()
            raise StartFailed(str(exc)) from None

    def stop(self) -> None:
        """Take a checkpoint (a clean stop; first, so once the sockets are gone only the lock is left
        to release), remove the sockets (requests being answered get a moment to finish), close the
        index, release the lock (idempotent)."""
        if self.lock.held:
            self.service.memory.checkpoints.take_locked()
        stop_all(self.sockets)
        self.service.close()
        self.lock.release()

    def serve_forever(self, stopping: threading.Event) -> None:
        """Block until `stopping` is set (SIGTERM or SIGINT), then stop."""
        serve_until_signal(self.stop, stopping)


def run(config: Config, stopping: threading.Event) -> None:
    """Start memoryd and serve until `stopping` is set (by SIGTERM or SIGINT, perhaps already while
    it started).

    Raises:
        StartFailed: when it cannot start (nothing is left behind: no sockets, no lock).
    """
    server = Server(config)
    try:
        server.start()
    except LockHeld as exc:
        raise StartFailed(str(exc)) from None
    log.info("memoryd ready")
    server.serve_forever(stopping)
