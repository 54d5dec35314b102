"""Running a role in the foreground until SIGTERM or SIGINT (DESIGN 10.1), the same way for every role."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType

log = logging.getLogger("boxmaker")


def serve_until_signal(
    stop: Callable[[], None],
    tick: Callable[[], None] | None = None,
    every: float = 1.0,
    done: threading.Event | None = None,
) -> None:
    """Block until SIGTERM or SIGINT (or `done` is set), calling `tick` every `every` seconds; then
    call `stop` (which removes the role's sockets and releases its lock).

    Must be called from the main thread (signal handlers can only be set there).
    """
    finished = done or threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        del frame
        log.info("stopping on signal %d", signum)
        finished.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    try:
        while not finished.wait(every):
            if tick is not None:
                tick()
    finally:
        stop()
