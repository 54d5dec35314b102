"""The sessions a loop holds in memory, and who is using them now (M5a section 9; seed 003 section 12.3).

`OpenSessions` keeps, under one guard lock: the open `Session` objects, most recently used last (at
most `OPEN_SESSIONS`; the others are read from disk when they are used again); each session's turn
lock (held by its turn, and by a compaction); the sessions being compacted; and the erasures each
open session was live for (`Erased`, in memory only, never on disk; `boxmaker.loopd.erase`).

A session is *live* while its turn lock is held or it is being compacted: an erasure cannot take its
context back, so it keeps the erased texts and the loop scrubs the session's files again after each
of its turns.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

from boxmaker.loopd.session import Session

log = logging.getLogger("boxmaker.loopd")

#: How many sessions a loop keeps open in memory; others are read from disk when they are used.
OPEN_SESSIONS = 64

#: An erasure a session was live for: (its erasure id, the erased texts).
Erased = tuple[str, tuple[str, ...]]


class OpenSessions:
    """The open sessions of one loop, their turn locks, the compactions under way and the erasures
    each open session was live for."""

    def __init__(self) -> None:
        self._open: dict[str, Session] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._compacting: set[str] = set()
        self._erased: dict[str, list[Erased]] = {}

    # Open sessions -------------------------------------------------------------------------------

    def lock(self, session_id: str) -> threading.Lock:
        """The session's turn lock (made on first use and kept: a thread may be about to take it)."""
        with self._guard:
            return self._locks.setdefault(session_id, threading.Lock())

    def reuse(self, session_id: str) -> Session | None:
        """The open session, now the most recently used, when its files are as it left them; None
        when it is not open, or when they changed on disk (it is dropped, to be read again)."""
        with self._guard:
            known = self._open.pop(session_id, None)
            if known is not None and known.unchanged():
                self._open[session_id] = known  # most recently used last
                return known
        if known is not None:
            log.warning("session %s changed on disk outside loopd; reading it again", session_id)
        return None

    def add(self, session: Session) -> None:
        """Hold `session` open (the most recently used), dropping the least recently used ones over
        `OPEN_SESSIONS`."""
        with self._guard:
            self._open[session.id] = session
            self._evict()

    def _evict(self) -> None:
        """Keep at most `OPEN_SESSIONS` sessions in memory, dropping the least recently opened ones
        that no turn is using (they open again from disk). The caller holds `_guard`."""
        for name in list(self._open):
            if len(self._open) <= OPEN_SESSIONS:
                break
            lock = self._locks.get(name)
            if lock is not None and not lock.locked():
                del self._open[name]  # its lock stays: a thread may be about to take it
                self._erased.pop(name, None)

    def get(self, session_id: str) -> Session | None:
        """The open session `session_id`, or None."""
        with self._guard:
            return self._open.get(session_id)

    def ids(self) -> list[str]:
        """The open sessions' ids, least recently used first."""
        with self._guard:
            return list(self._open)

    def drop(self, session_id: str) -> None:
        """Stop holding the session (it is read again from disk next time); its erasures stay."""
        with self._guard:
            self._open.pop(session_id, None)

    def forget(self, session_id: str) -> None:
        """Stop holding the session, and forget the erasures it was live for."""
        with self._guard:
            self._open.pop(session_id, None)
            self._erased.pop(session_id, None)

    # Compactions ---------------------------------------------------------------------------------

    @contextlib.contextmanager
    def compaction(self, session_id: str) -> Iterator[None]:
        """Count the session as being compacted for the length of the block."""
        with self._guard:
            self._compacting.add(session_id)
        try:
            yield
        finally:
            with self._guard:
                self._compacting.discard(session_id)

    def compacting(self) -> list[str]:
        """The sessions being compacted now, sorted."""
        with self._guard:
            return sorted(self._compacting)

    # Erasure (seed 003 section 12.3; `boxmaker.loopd.erase`) -------------------------------------

    def live(self) -> dict[str, Session | None]:
        """Sessions with a turn running or a compaction under way now, with their open Session."""
        live: dict[str, Session | None] = {}
        with self._guard:
            names = [name for name, lock in self._locks.items() if lock.locked()]
            names += list(self._compacting)
            for name in names:
                live[name] = self._open.get(name)
        return live

    def keep_erased(self, names: list[str], erased: Erased) -> None:
        """Remember `erased` for each session in `names` (live ones: their turns may still log records
        that quote the erased texts), for as long as the session stays open."""
        with self._guard:
            for name in names:
                self._erased.setdefault(name, []).append(erased)

    def erased(self, session_id: str) -> list[Erased]:
        """The erasures the session was live for, oldest first."""
        with self._guard:
            return list(self._erased.get(session_id, ()))

    def rewritten(self, session_id: str, session: Session | None, live: bool) -> None:
        """After an erasure rewrote or deleted the session's files: a live session (`session`, when it
        is open) reads them again before its next turn; any other is dropped, to be read from disk."""
        with self._guard:
            if not live:
                self._open.pop(session_id, None)
            elif session is not None:
                session.reread = True
