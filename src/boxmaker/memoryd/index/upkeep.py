"""The live index's upkeep, done in the gaps between requests (issue 16): FTS5 segment merges and WAL
checkpoints, which SQLite otherwise does inside the write that triggers them.

Why: at 100,000 items a note's index insert takes about 0.1 ms, but one in 64 did the FTS5 table's
automatic merge work (5-11 ms), one in a few hundred merged new segments into the large one a build
leaves (0.4 s), and one in about 150 copied the write-ahead log into the file and synced both (the
automatic checkpoint at 1,000 pages, 40 ms): a note's p99 at 100,000 items was 11-12 ms, over the
issue's 10.

How: the live connection never merges by itself (automerge 0, `schema.live_settings`) and checkpoints
by itself only past `schema.WAL_CAP` pages. After each write the index calls `Upkeep.due`; the
upkeep thread waits for a gap (the caller's `gap`: no request answered for a few ms), then, on the
index's own writer connection under the index's lock (`run`: no second connection, so a rebuild's swap
and an erasure's seal have only the one to close), does merge steps of `MERGE_PAGES` pages until no
level of the FTS5 table holds ``usermerge`` (4) segments, then one passive checkpoint. Between two steps
the lock is free: a request that comes meanwhile waits for one step at most (usually under 1 ms; the
step that ends a merge into the large segment frees its pages, up to about 50 ms at 100,000 records).

When no gap comes (a client writing without pause), SQLite's own bounds still hold: a level of 16
segments is merged in the write that makes it (FTS5's ``crisismerge``), and the log is checkpointed in
the write that passes `schema.WAL_CAP` pages. Both operations are SQLite's own on a WAL file, so a
crash (kill -9, power loss) at any point leaves the index as SQLite leaves any committed WAL database:
every committed write is in the log or the file.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable

log = logging.getLogger("boxmaker.memoryd.index")

#: Pages of merged output one merge step writes (FTS5's ``merge`` command; about 64 KB).
MERGE_PAGES = 16
#: The longest one wait for a gap lasts (seconds) before `stop` is looked at again.
GAP_WAIT = 0.25


def merge_step(conn: sqlite3.Connection) -> bool:
    """One step of FTS5 merge work on the live table (`MERGE_PAGES` pages); True when it found some to
    do (the FTS5 documentation's test: the connection's change count moved by 2 or more).

    Raises:
        sqlite3.Error: when the file cannot be written.
    """
    before = conn.total_changes
    conn.execute("INSERT INTO hits(hits, rank) VALUES ('merge', ?)", (MERGE_PAGES,))
    return conn.total_changes - before >= 2


def checkpoint(conn: sqlite3.Connection) -> tuple[int, int]:
    """A passive checkpoint (never waits for a reader or a writer). Returns the pages in the log and
    the pages copied into the file.

    Raises:
        sqlite3.Error: when the file cannot be written.
    """
    row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return int(row[1]), int(row[2])


class Upkeep:
    """The upkeep thread of one live index (module docstring).

    Args:
        run: calls its argument with the live writer connection, under the index's lock, and returns
            what it returned; returns False without calling it when the index has no live file (closed,
            or a swap in progress).
        gap: waits up to the given seconds for a gap between requests; True when one came.
    """

    def __init__(
        self,
        run: Callable[[Callable[[sqlite3.Connection], bool]], bool],
        gap: Callable[[float], bool],
    ) -> None:
        self.run = run
        self.gap = gap
        self._wake = threading.Condition()
        self._due = False
        self._stopping = False
        self._busy = False
        self._thread: threading.Thread | None = None
        #: Merge steps that did work, and checkpoints taken (for tests and the benchmark).
        self.merges = 0
        self.checkpoints = 0

    def start(self) -> None:
        """Start the thread (once)."""
        if self._thread is None:
            self._stopping = False
            self._thread = threading.Thread(target=self._loop, name="index-upkeep", daemon=True)
            self._thread.start()

    def due(self) -> None:
        """The live file was written: merge and checkpoint at the next gap."""
        with self._wake:
            self._due = True
            self._wake.notify()

    def stop(self) -> None:
        """Stop the thread; a step under way finishes first (it holds the index's lock)."""
        with self._wake:
            self._stopping = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def idle(self) -> bool:
        """True when nothing is due (for tests: the upkeep has caught up)."""
        with self._wake:
            return not self._due and not self._busy

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._due and not self._stopping:
                    self._wake.wait()
                if self._stopping:
                    return
                self._due = False
                self._busy = True
            try:
                self._work()
            finally:
                with self._wake:
                    self._busy = False

    def _work(self) -> None:
        """Merge steps until none finds work, then a checkpoint, each in a gap."""
        more = True
        while more:
            while not self.gap(GAP_WAIT):
                if self._stopping:
                    return
            if self._stopping:
                return
            try:
                more = self.run(self._step)
            except sqlite3.Error as exc:  # SQLite's own bounds keep the file in shape meanwhile
                log.warning("index upkeep stopped until the next write: %s", exc)
                return

    def _step(self, conn: sqlite3.Connection) -> bool:
        if merge_step(conn):
            self.merges += 1
            return True
        checkpoint(conn)
        self.checkpoints += 1
        return False
