"""The live index: ``{home}/index/memory.sqlite3`` (M5a sections 6 and 10; DESIGN 7).

Disposable: deleting it and restarting memoryd, or `rebuild` (``bxctl reindex``), builds it again from
``sessions/`` and ``notes.md``.

- Writers (catch-up after ``session_updated`` and at start, notes as they are appended, rebuild) are
  serialised by one lock.
- Readers (recall) use one connection per thread from a pool. `rebuild` builds a new file beside the
  live one while recall keeps answering, catches it up under the writers' lock, then, holding every
  reader out for a moment, closes every connection to the old file before renaming the new one over
  it (renaming an SQLite file under an open connection can corrupt it).
- A file that cannot be opened, or fails its check, is moved aside and rebuilt (runbook
  memory-index-damaged).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from boxmaker.memoryd.entries import normalise_newlines
from boxmaker.memoryd.hits import Hit
from boxmaker.memoryd.indexdb import (
    Cancelled,
    Counts,
    IndexDB,
    LogShrank,
    SchemaMismatch,
    connect,
    finish_bulk,
    migrate,
    start_bulk,
)
from boxmaker.memoryd.notes import Note
from boxmaker.memoryd.notes import parse as parse_notes
from boxmaker.memoryd.query import Query
from boxmaker.memoryd.search import Frequencies, hits, merge, plan, scored
from boxmaker.proto import fsio
from boxmaker.proto.errors import BoxmakerError
from boxmaker.proto.labels import DataClass

log = logging.getLogger("boxmaker.memoryd.index")


#: Reader connections kept open between recalls, at most.
IDLE_READERS = 4


class IndexUnusable(BoxmakerError):
    """Raised when the index folder or file cannot be created at all (memoryd-start-failed)."""


def fts5_problem() -> str:
    """ "" when Python's SQLite has FTS5 with the trigram tokenizer, else a sentence saying what lacks."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61 remove_diacritics 2')")
    except sqlite3.Error as exc:
        return f"Python's SQLite {sqlite3.sqlite_version} has no usable FTS5 ({exc})"
    finally:
        conn.close()
    return ""


class _ReadWriteLock:
    """Many readers or one writer (the swap)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._writing)
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._writing)
            self._writing = True
            self._cond.wait_for(lambda: self._readers == 0)
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()


class Index:
    """memoryd's index, safe to use from many threads.

    Args:
        path: the database file (its folder is created 0700).
        sessions: the sessions folder.
        notes: notes.md.
        max_class: rows above this class are not indexed (``[index] max_class``).
    """

    def __init__(self, path: Path, sessions: Path, notes: Path, max_class: DataClass) -> None:
        self.path = path
        self.sessions = sessions
        self.notes = notes
        self.max_class = max_class
        self._lock = threading.RLock()
        self._rebuilding = threading.Lock()
        self._swap = _ReadWriteLock()
        self._idle: list[sqlite3.Connection] = []  # reader connections not in use
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="recall")
        self._readers_lock = threading.Lock()
        self._frequencies = Frequencies()
        self._db: IndexDB | None = None
        self._notes_hash = hashlib.sha256()
        self._notes_bytes = 0
        self._notes_stat: tuple[int, int] | None = None
        self._ready = threading.Event()
        self._ready.set()
        self._waiting: set[str] = set()
        self._waiting_lock = threading.Lock()
        self._warming: threading.Thread | None = None
        self._cancel = threading.Event()

    # Opening and closing ---------------------------------------------------------------------------

    def open(self) -> None:
        """Open (or create) the file; a damaged one is moved aside and a new one built.

        Raises:
            IndexUnusable: the folder or a new file cannot be created.
        """
        try:
            fsio.ensure_dir(self.path.parent)
        except OSError as exc:
            raise IndexUnusable(f"cannot create {self.path.parent}: {exc.strerror or exc}") from None
        for suffix in ("", "-wal", "-shm"):  # a rebuild a crash interrupted
            Path(f"{self.path}.new{suffix}").unlink(missing_ok=True)
        try:
            self._db = self._open_file(self.path, check=True)
        except (sqlite3.DatabaseError, SchemaMismatch) as exc:
            aside = self.path.with_name(f"{self.path.name}.damaged-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%SZ}")
            log.error("memory-index-damaged: %s (%s); moved it to %s and rebuilding", self.path, exc, aside)
            for suffix in ("", "-wal", "-shm"):
                src = Path(str(self.path) + suffix)
                if src.exists():
                    os.replace(src, Path(str(aside) + suffix))
            try:
                self._db = self._open_file(self.path)
            except sqlite3.DatabaseError as again:
                raise IndexUnusable(f"cannot create {self.path}: {again}") from None

    def warm_up(self) -> None:
        """Bring the index up to date on a background thread (at start), so memoryd answers at
        once: a new index is built in bulk and swapped in, an existing one catches up with notes.md
        and every session. Until it is done, `session_updated` is queued and `wait_ready` waits."""
        self._ready.clear()
        self._warming = threading.Thread(target=self._warm, name="index-warm-up", daemon=True)
        self._warming.start()

    def wait_ready(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for `warm_up` to finish; True when it has."""
        return self._ready.wait(timeout)

    def _warm(self) -> None:
        started = time.monotonic()
        try:
            if self.is_empty():
                self.rebuild()
            else:
                self.sync_notes()
                self.catch_up_all()
            while True:
                with self._waiting_lock:
                    sessions = sorted(self._waiting)
                    self._waiting.clear()
                    if not sessions:
                        self._ready.set()
                        break
                with self._lock:
                    self.db.catch_up_all(sessions)
        except Cancelled:
            return
        except Exception:
            log.exception("memory-index-damaged: bringing the index up to date failed; run `bxctl reindex`")
            self._ready.set()
            return
        log.info("index ready in %.1f s: %s", time.monotonic() - started, self.counts())

    def _open_file(self, path: Path, bulk: bool = False, check: bool = False) -> IndexDB:
        conn = connect(path, bulk)
        try:
            os.chmod(path, 0o600)
            if check and conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("quick_check failed")
            migrate(conn)
            if bulk:
                start_bulk(conn)
        except BaseException:
            conn.close()
            raise
        return IndexDB(conn, self.sessions, self.max_class, self._cancel)

    def is_empty(self) -> bool:
        """True for an index that has read no log and no note (new, or just moved aside)."""
        with self._lock:
            counts = self.db.counts()
            return counts.logs == 0 and counts.notes == 0 and self.db.meta("notes_bytes") is None

    def close(self) -> None:
        """Stop a warm-up still running, then close every connection."""
        self._cancel.set()
        if self._warming is not None:
            self._warming.join()
        self._pool.shutdown(wait=True)
        with self._lock, self._swap.write():
            self._close_readers()
            if self._db is not None:
                self._db.conn.close()
                self._db = None

    def _close_readers(self) -> None:
        """Close the idle reader connections (callers hold the swap's write side, so none is in use)."""
        with self._readers_lock:
            for conn in self._idle:
                conn.close()
            self._idle.clear()
            self._frequencies = Frequencies()

    @property
    def db(self) -> IndexDB:
        """The writer's database (after `open`)."""
        if self._db is None:
            raise RuntimeError("the index is not open")
        return self._db

    # Writing ---------------------------------------------------------------------------------------

    def catch_up(self, session: str) -> int:
        """Index what `session` logged since its progress (``session_updated``). Returns rows added
        (0 while `warm_up` runs: the session is queued for it)."""
        with self._waiting_lock:
            if not self._ready.is_set():
                self._waiting.add(session)
                return 0
        with self._lock:
            try:
                return self.db.catch_up(session)
            except LogShrank as exc:
                log.warning("%s; rebuilding the index", exc)
                self._rebuild_locked()
                return 0

    def catch_up_all(self) -> int:
        """Catch up every session (at start). Returns rows added."""
        with self._lock:
            try:
                return self.db.catch_up_all()
            except LogShrank as exc:
                log.warning("%s; rebuilding the index", exc)
                self._rebuild_locked()
                return 0

    def add_notes(self, notes: Sequence[Note], data: bytes) -> None:
        """Index notes just appended to notes.md as `data` (the writer calls this, in append order)."""
        with self._lock:
            if _stat(self.notes) == self._notes_stat:
                return  # a recall's `refresh_notes` saw this append first and indexed it
            self._notes_hash.update(data)
            self._notes_bytes += len(data)
            self.db.add_notes(notes)
            self.db.set_meta("notes_sha256", self._notes_hash.hexdigest())
            self.db.set_meta("notes_bytes", str(self._notes_bytes))
            self._notes_stat = _stat(self.notes)

    def sync_notes(self) -> None:
        """Bring the index's notes in line with notes.md: notes appended since the index last saw
        the file are added; after any other change (a hand edit) every note is indexed again."""
        with self._lock:
            data, stat = _snapshot(self.notes)
            if not _sync_notes(self.db, data):
                log.info("notes.md was edited by hand; indexing its notes again")
            self._load_notes_state(data, stat)

    def refresh_notes(self) -> None:
        """`sync_notes` when notes.md changed since memoryd last wrote or read it (recall calls this,
        so a note the owner deleted by hand is not recalled)."""
        if _stat(self.notes) != self._notes_stat:
            self.sync_notes()

    def _load_notes_state(self, data: bytes, stat: tuple[int, int] | None) -> None:
        """What the index has seen of notes.md: `data`, read at `stat`. An append made after that
        read differs from `stat`, so `add_notes` still indexes it."""
        known = int(self.db.meta("notes_bytes") or 0)
        self._notes_hash = hashlib.sha256(data[:known])
        self._notes_bytes = known
        self._notes_stat = stat

    def rebuild(self) -> Counts:
        """Build a new index file from nothing while recall keeps answering, then swap it in.

        Returns:
            What the new index holds.
        """
        with self._rebuilding:
            fresh, db = self._fresh()
            try:
                self._fill(db)
                with self._lock:
                    seen = self._fill(db)
                    counts = db.counts()
                    finish_bulk(db.conn)
                    db.conn.close()
                    self._swap_in(fresh)
                    self._load_notes_state(*seen)
            except BaseException:
                db.conn.close()
                raise
        log.info("reindexed: %d logs, %d records, %d notes", counts.logs, counts.records, counts.notes)
        return counts

    def _rebuild_locked(self) -> None:
        with self._rebuilding:
            fresh, db = self._fresh()
            try:
                seen = self._fill(db)
                finish_bulk(db.conn)
            finally:
                db.conn.close()
            self._swap_in(fresh)
            self._load_notes_state(*seen)

    def _fresh(self) -> tuple[Path, IndexDB]:
        fresh = self.path.with_name(self.path.name + ".new")
        for suffix in ("", "-wal", "-shm"):
            Path(str(fresh) + suffix).unlink(missing_ok=True)
        return fresh, self._open_file(fresh, bulk=True)

    def _fill(self, db: IndexDB) -> tuple[bytes, tuple[int, int] | None]:
        """Catch `db` up with every session and notes.md; returns the notes.md it saw."""
        db.catch_up_all()
        data, stat = _snapshot(self.notes)
        _sync_notes(db, data)
        return data, stat

    def _swap_in(self, fresh: Path) -> None:
        with self._swap.write():
            self._close_readers()
            if self._db is not None:
                self._db.conn.close()
                self._db = None
            for suffix in ("-wal", "-shm"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
            os.replace(fresh, self.path)
            fsio.fsync_dir(self.path.parent)
            self._db = self._open_file(self.path)

    # Reading ---------------------------------------------------------------------------------------

    @contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        """A read-only connection from the pool (a new one when all are busy), given back after.

        Connections are kept between requests (each keeps its page cache warm); at most
        `IDLE_READERS` wait idle, the others are closed when given back.
        """
        with self._readers_lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = sqlite3.connect(
                f"file:{self.path}?mode=ro", uri=True, check_same_thread=False, timeout=60.0
            )
            conn.execute("PRAGMA cache_size=-65536")
        try:
            yield conn
        finally:
            with self._readers_lock:
                keep = len(self._idle) < IDLE_READERS
                if keep:
                    self._idle.append(conn)
            if not keep:
                conn.close()

    def search(self, query: Query, k: int) -> list[Hit]:
        """The best `k` hits for a built query, best first ([] when it has no terms).

        When the search needs two queries (`search.plan`), the second runs on another connection
        and thread at the same time (SQLite works without Python's lock), so both cores work.
        """
        if not query.match:
            return []
        with self._swap.read(), self._reader() as conn:
            matches = plan(conn, query, self._frequencies)
            if len(matches) == 1:
                return hits(conn, merge([scored(conn, matches[0], k)], k))
            second = self._pool.submit(self._scored_elsewhere, matches[1], k)
            first = scored(conn, matches[0], k)
            return hits(conn, merge([first, second.result()], k))

    def _scored_elsewhere(self, match: str, k: int) -> list[tuple[int, float]]:
        with self._reader() as conn:
            return scored(conn, match, k)

    def counts(self) -> Counts:
        """What the index holds now."""
        with self._lock:
            return self.db.counts()


def _snapshot(path: Path) -> tuple[bytes, tuple[int, int] | None]:
    """A file's bytes and the (size, mtime) they were read at; nothing for a missing file."""
    try:
        with path.open("rb") as handle:
            info = os.fstat(handle.fileno())
            return handle.read(), (info.st_size, info.st_mtime_ns)
    except FileNotFoundError:
        return b"", None


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    return info.st_size, info.st_mtime_ns


def _sync_notes(db: IndexDB, data: bytes) -> bool:
    """Bring `db`'s notes in line with notes.md's `data`. Returns True when notes.md had only grown
    by appending since `db` last saw it (the new notes were added), False when it had changed
    otherwise (every note was indexed again)."""
    known = int(db.meta("notes_bytes") or 0)
    digest = hashlib.sha256(data[:known])
    notes = parse_notes(normalise_newlines(data.decode("utf-8", errors="replace")))
    count = int(db.meta("notes_count") or 0)
    appended = (
        known <= len(data)
        and digest.hexdigest() == (db.meta("notes_sha256") or hashlib.sha256().hexdigest())
        and len(notes) >= count
    )
    if appended:
        db.add_notes(notes[count:])
    else:
        db.replace_notes(notes)
    db.set_meta("notes_sha256", hashlib.sha256(data).hexdigest())
    db.set_meta("notes_bytes", str(len(data)))
    return appended
