"""Reading the live index: a pool of read-only connections, and a gate that holds readers out while
the file is swapped (M5a sections 5 and 10; DESIGN 7).

Each recall takes a connection from the pool and gives it back (connections keep their page cache
warm between requests; at most `IDLE_READERS` wait idle). A recall's queries (`search.plan`: one or
two) run one after the other on its one connection: running the second on another connection and
thread at the same time was measured slower on the two shared cores it runs on (issue 16; the hand-off
between threads costs more than the overlap saves; docs/decisions.md).
`Readers.closed` waits for every reader to finish and closes every connection, so the file can be
renamed safely (renaming an SQLite file under an open connection can corrupt it).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from boxmaker.memoryd.index.hits import Hit
from boxmaker.memoryd.index.query import Query
from boxmaker.memoryd.index.ranker import Ranker, problem
from boxmaker.memoryd.index.rowtext import hits
from boxmaker.memoryd.index.schema import LIVE_CACHE_KIB, Counts, counts_of
from boxmaker.memoryd.index.search import Frequencies, rank

log = logging.getLogger("boxmaker.memoryd.index")

#: Reader connections kept open between recalls, at most.
IDLE_READERS = 4
#: The page cache of a reader's own connection when a `ranker.Ranker` ranks (KiB).
READ_BACK_CACHE_KIB = 1024


@dataclass(slots=True)
class _Reader:
    """One pooled reader: a connection, and its `ranker.Ranker` when the compiled ranking is there."""

    conn: sqlite3.Connection
    ranker: Ranker | None

    def close(self) -> None:
        self.conn.close()
        if self.ranker is not None:
            self.ranker.close()


class _Gate:
    """Many readers or one swapper."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._swapping = False

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._swapping)
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def swap(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._swapping)
            self._swapping = True
            self._cond.wait_for(lambda: self._readers == 0)
        try:
            yield
        finally:
            with self._cond:
                self._swapping = False
                self._cond.notify_all()


class Readers:
    """Read-only access to one index file, safe from many threads; hits are read back from the logs
    in `sessions` and import archives in `imports` (`rowtext`)."""

    def __init__(
        self,
        path: Path,
        sessions: Path,
        on_stale: Callable[[], None] | None = None,
        imports: Path | None = None,
    ) -> None:
        self.path = path
        self.sessions = sessions
        self.imports = imports
        self.on_stale = on_stale
        self._gate = _Gate()
        self._idle: list[_Reader] = []
        self._lock = threading.Lock()
        #: "" when recall scores with `ranker` (given the remembered frequencies), else why bm25() does
        self.ranking_problem = problem()
        if self.ranking_problem:  # the same ranking, slower (`ranker`)
            log.info("recall scores with FTS5's bm25(): %s", self.ranking_problem)
        self.frequencies = Frequencies(exact=not self.ranking_problem)

    def _open(self) -> _Reader:
        # percent-encoded: a ``?`` or ``#`` in the home's path would otherwise end the file name
        conn = sqlite3.connect(
            f"{self.path.absolute().as_uri()}?mode=ro", uri=True, check_same_thread=False, timeout=60.0
        )
        # with a ranker, this connection only reads hits back (ten rows by rowid): a small cache
        conn.execute(
            f"PRAGMA cache_size=-{READ_BACK_CACHE_KIB if not self.ranking_problem else LIVE_CACHE_KIB}"
        )
        ranker = None
        if not self.ranking_problem:
            try:
                ranker = Ranker(self.path, LIVE_CACHE_KIB)
            except sqlite3.Error:
                conn.close()
                raise
        return _Reader(conn, ranker)

    @contextmanager
    def _reader(self) -> Iterator[_Reader]:
        with self._lock:
            reader = self._idle.pop() if self._idle else None
        if reader is None:
            reader = self._open()
        try:
            yield reader
        finally:
            with self._lock:
                keep = len(self._idle) < IDLE_READERS
                if keep:
                    self._idle.append(reader)
            if not keep:
                reader.close()

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """A connection to read with, the file held in place meanwhile."""
        with self._gate.read(), self._reader() as reader:
            yield reader.conn

    def search(self, query: Query, k: int) -> list[Hit]:
        """The best `k` hits for a built query, best first: `ranker.Ranker.rank` when the compiled
        ranking is there, else `search.rank` (the same rows in the same order) on one connection.

        Raises:
            sqlite3.Error: when the file cannot be read.
        """
        with self._gate.read(), self._reader() as reader:
            if reader.ranker is not None:
                found = reader.ranker.rank(query, k, self.frequencies)
            else:
                found = rank(reader.conn, query, k, self.frequencies)
            return hits(reader.conn, self.sessions, found, self.on_stale, self.imports)

    def counts(self) -> Counts:
        """What the file holds (without waiting for a writer)."""
        with self.reading() as conn:
            return counts_of(conn)

    def quick_check(self) -> str:
        """SQLite's ``quick_check`` of the file ("ok" when sound)."""
        with self.reading() as conn:
            return str(conn.execute("PRAGMA quick_check").fetchone()[0])

    @contextmanager
    def closed(self) -> Iterator[None]:
        """Hold every reader out and close every connection, for the duration (a swap)."""
        with self._gate.swap():
            self._close_idle()
            yield
            self.frequencies = Frequencies(exact=not self.ranking_problem)

    def _close_idle(self) -> None:
        with self._lock:
            for reader in self._idle:
                reader.close()
            self._idle.clear()

    def shutdown(self) -> None:
        """Close for good (no search after this)."""
        with self._gate.swap():
            self._close_idle()
