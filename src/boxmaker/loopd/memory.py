"""Where a session's memory block comes from (M5a sections 4 and 9).

`MemorySource` is what the loop needs: the block for a new session's baseline, and a best-effort
`session_updated` after a finished turn. `MemorydSource` asks memoryd over its loop socket; `NoMemory`
is for tests and self-checks. A loop cannot be built without one, so `loopd serve` cannot leave memory
out by accident.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

from boxmaker.proto import wire
from boxmaker.proto.errors import BoxmakerError, PeerError
from boxmaker.proto.messages import MemoryBlock, MemoryBlockReply, SessionUpdated

log = logging.getLogger("boxmaker.loopd")


class MemoryUnavailable(BoxmakerError):
    """Raised when the memory block cannot be had: a new session is then refused (runbook
    memory-unavailable); running sessions are unaffected."""

    code = "memory-unavailable"
    runbook = "memory-unavailable"

    def __init__(self, why: str) -> None:
        super().__init__(f"memory is unavailable, so no new session can start: {why}")
        self.why = why


class MemorySource(Protocol):
    """The memory a loop is built with."""

    def block(self) -> str:
        """The rendered memory block (M5a section 4).

        Raises:
            MemoryUnavailable: memoryd is unreachable or refuses (a file over its limit, unreadable).
        """
        ...

    def session_updated(self, session: str, turn: int) -> None:
        """Tell memory that `session` has new records, best effort: never raises."""
        ...


class NoMemory:
    """A memory source with nothing in it, for tests: the block is empty and updates go nowhere."""

    def block(self) -> str:
        """The empty block."""
        return ""

    def session_updated(self, session: str, turn: int) -> None:
        """Nothing to tell."""
        del session, turn


class MemorydSource:
    """memoryd over its loop socket (``run/loop-memory/memory.sock`` by default).

    Args:
        socket: memoryd's loop socket.
        timeout: seconds to wait for the block; `session_updated` waits at most 5 seconds.
    """

    def __init__(self, socket: Path, timeout: float = 30.0) -> None:
        self.socket = socket
        self.timeout = timeout

    def block(self) -> str:
        """Ask memoryd for the block.

        Raises:
            MemoryUnavailable: with memoryd's sentence, or why it could not be reached.
        """
        try:
            reply = wire.call(self.socket, MemoryBlock(), timeout=self.timeout)
        except PeerError as exc:
            raise MemoryUnavailable(exc.message) from None
        if not isinstance(reply, MemoryBlockReply):
            raise MemoryUnavailable(f"memoryd answered {type(reply).__name__} to memory_block")
        return reply.text

    def session_updated(self, session: str, turn: int) -> None:
        """Send `session_updated`; a failure is one log line (memoryd catches up at its next start)."""
        try:
            wire.call(self.socket, SessionUpdated(session=session, turn=turn), timeout=5.0)
        except PeerError as exc:
            log.warning("session_updated for %s not delivered: %s", session, exc.message)
