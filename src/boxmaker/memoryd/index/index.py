"""The live index: ``{home}/index/memory.sqlite3`` (M5a sections 6 and 10; DESIGN 7).

Disposable: deleting it and restarting memoryd, or `rebuild` (``bxctl reindex``), builds it again from
``sessions/`` and ``notes.md``.

Concurrency, so memoryd always answers:

- Recall reads through `readers.Readers` (a pool of read-only connections) and never waits for a
  writer; only a swap holds it out, for a moment.
- Writes to the live file hold `_lock` only while they use the connection: a catch-up holds it per
  batch, so notes being appended and `status` go between batches. One catch-up runs at a time
  (`_catching`), since each reads the progress it resumes from.
- At start `warm_up` does the slow part (a check of the file, the catch-up of every session, or a
  whole build) on a background thread; until it is done, `session_updated` is queued and recall
  waits (`wait_ready`).
- `rebuild` builds a new file beside the live one while recall keeps answering, catches it up with
  every catch-up held out, then closes every connection to the old file before renaming the new one
  over it (renaming an SQLite file under an open connection can corrupt it). A log that shrank
  starts a rebuild in the background.
- A file that cannot be opened, or fails its check, is moved aside and rebuilt (runbook
  memory-index-damaged).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from boxmaker.memoryd.files.notes import Note
from boxmaker.memoryd.index.db import Cancelled, IndexDB, LogShrank
from boxmaker.memoryd.index.filecare import BUILD_LEFTOVERS, compact, delete, move_aside, seal, sync
from boxmaker.memoryd.index.forget import forget
from boxmaker.memoryd.index.hits import Hit
from boxmaker.memoryd.index.notesync import Stat, add_appended, snapshot, stat_of, sync_index_notes
from boxmaker.memoryd.index.query import Query
from boxmaker.memoryd.index.readers import Readers
from boxmaker.memoryd.index.schema import (
    SCHEMA_VERSION,
    Counts,
    SchemaMismatch,
    connect,
    finish_bulk,
    live_settings,
    migrate,
    optimize,
    start_bulk,
)
from boxmaker.memoryd.index.upkeep import Upkeep
from boxmaker.memoryd.withdrawal.exclusion import Exclusion
from boxmaker.proto import fsio, heap
from boxmaker.proto.errors import BoxmakerError
from boxmaker.proto.labels import DataClass

log = logging.getLogger("boxmaker.memoryd.index")


#: At most one rebuild for hits that cannot be read back in this many seconds.
STALE_REBUILD_EVERY = 60.0


class IndexUnusable(BoxmakerError):
    """Raised when the index folder or file cannot be created at all (memoryd-start-failed)."""


class Index:
    """memoryd's index, safe to use from many threads.

    Args:
        path: the database file (its folder is created 0700).
        sessions: the sessions folder.
        notes: notes.md.
        max_class: rows above this class are not indexed (``[index] max_class``).
        exclusion: what is withdrawn now (`controls.Controls.exclusion`); never indexed.
        imports: the import archives' folder, ``imports/`` (None: none are indexed).
        gap: waits up to the given seconds for a gap between requests, True when one came (`upkeep`
            works only then; `items.pagefiles.Requests.wait`). None: no requests to wait for.
    """

    def __init__(
        self,
        path: Path,
        sessions: Path,
        notes: Path,
        max_class: DataClass,
        exclusion: Callable[[], Exclusion] | None = None,
        *,
        imports: Path | None = None,
        gap: Callable[[float], bool] | None = None,
    ) -> None:
        self.path = path
        self.imports = imports
        self.exclusion = exclusion
        self.sessions = sessions
        self.notes = notes
        self.max_class = max_class
        self.readers = Readers(path, sessions, self._stale, imports)
        self._stale_rebuild = -STALE_REBUILD_EVERY
        self._lock = threading.RLock()  # the live connection
        self._catching = threading.Lock()  # one catch-up at a time
        self._rebuilding = threading.Lock()
        self._db: IndexDB | None = None
        self._notes_hash = hashlib.sha256()
        self._notes_bytes = 0
        self._notes_stat: Stat = None
        self._behind = ""  # why notes memoryd wrote are not indexed yet ("" when none are)
        self._ready = threading.Event()
        self._ready.set()
        self._waiting: set[str] = set()
        self._waiting_lock = threading.Lock()
        self._background: list[threading.Thread] = []
        self._cancel = threading.Event()
        self._forgotten: set[str] = set()
        self._building: IndexDB | None = None
        #: Why the next build from nothing happens, when it is not the owner's reindex ("" otherwise).
        self.rebuild_reason = ""
        #: Merges and checkpoints of the live file, in the gaps between requests (from `open` to `close`).
        self.upkeep = Upkeep(self._on_writer, gap or (lambda _: True))

    # Opening and closing ---------------------------------------------------------------------------

    def open(self) -> None:
        """Open (or create) the file; one that is not a usable index is moved aside at once.

        Raises:
            IndexUnusable: the folder or a new file cannot be created.
        """
        try:
            fsio.ensure_dir(self.path.parent)
        except OSError as exc:
            raise IndexUnusable(f"cannot create {self.path.parent}: {exc.strerror or exc}") from None
        delete(self.path.with_name(f"{self.path.name}.new"), BUILD_LEFTOVERS)  # a crash's rebuild, its copy
        try:
            self._db = self._open_file(self.path)
        except SchemaMismatch as exc:
            log.warning("%s: %s; deleting it and building it again from the logs", self.path, exc)
            self.rebuild_reason = f"index schema version {exc.version} replaced by {SCHEMA_VERSION}"
            delete(self.path)
            self._db = self._open_file(self.path)
        except sqlite3.DatabaseError as exc:
            move_aside(self.path, exc)
            try:
                self._db = self._open_file(self.path)
            except sqlite3.DatabaseError as again:
                raise IndexUnusable(f"cannot create {self.path}: {again}") from None
        self.upkeep.start()

    def _open_file(self, path: Path, bulk: bool = False, written: int = 0) -> IndexDB:
        conn = connect(path, bulk)
        try:
            os.chmod(path, 0o600)
            migrate(conn)
            if bulk:
                start_bulk(conn)
            else:
                live_settings(conn)
        except BaseException:
            conn.close()
            raise
        db = IndexDB(conn, self.sessions, self.max_class, self._cancel, self.exclusion, imports=self.imports)
        db.written = written  # a build's rows so far, when its file is opened again
        return db

    def close(self) -> None:
        """Stop the background work (between two batches), then close every connection."""
        self._cancel.set()
        for thread in self._background:
            thread.join()
        self.upkeep.stop()
        self.readers.shutdown()
        with self._lock:
            if self._db is not None:
                self._db.conn.close()
                self._db = None

    def _on_writer(self, step: Callable[[sqlite3.Connection], bool]) -> bool:
        """`step` on the live writer connection, under `_lock` (the upkeep's way in); False when the
        index has no live file now."""
        with self._lock:
            if self._db is None:
                return False
            return step(self._db.conn)

    @property
    def db(self) -> IndexDB:
        """The writer's database (after `open`)."""
        if self._db is None:
            raise RuntimeError("the index is not open")
        return self._db

    # Warming up at start ---------------------------------------------------------------------------

    def warm_up(self) -> None:
        """Bring the index up to date on a background thread (at start), so memoryd answers at
        once: the file is checked (a damaged one is moved aside), a new index is built in bulk and
        swapped in, an existing one catches up with notes.md and every session. Until it is done,
        `session_updated` is queued and `wait_ready` waits."""
        self._ready.clear()
        self._run_in_background(self._warm, "index-warm-up")

    def wait_ready(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for `warm_up` to finish; True when it has."""
        return self._ready.wait(timeout)

    def _run_in_background(self, target: object, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)  # type: ignore[arg-type]
        self._background.append(thread)
        thread.start()

    def _warm(self) -> None:
        started = time.monotonic()
        try:
            verdict = self.readers.quick_check()
            if verdict != "ok":
                self._replace_damaged(verdict)
            if self.is_empty():
                self.rebuild()
            else:
                self.sync_notes()
                self.catch_up_all()
            self._drain_waiting()
        except Cancelled:
            return
        except Exception:
            log.exception("memory-index-damaged: bringing the index up to date failed; run `bxctl reindex`")
            self._ready.set()
            return
        heap.release_free_memory()  # what the check, the build or the catch-up freed (issue 16)
        log.info("index ready in %.1f s: %s", time.monotonic() - started, self.counts())

    def _drain_waiting(self) -> None:
        while True:
            with self._waiting_lock:
                sessions = sorted(self._waiting)
                self._waiting.clear()
                if not sessions:
                    self._ready.set()
                    return
            self._catch_up(sessions)

    def _replace_damaged(self, why: str) -> None:
        with self._catching, self._lock, self.readers.closed():
            self.db.conn.close()
            move_aside(self.path, f"quick_check: {why}")
            self._db = self._open_file(self.path)

    def is_empty(self) -> bool:
        """True for an index that has read no log and no note (new, or just moved aside)."""
        with self._lock:
            counts = self.db.counts()
            return counts.logs == 0 and counts.notes == 0 and self.db.meta("notes_bytes") is None

    # Sessions ------------------------------------------------------------------------------------

    def catch_up(self, session: str) -> int:
        """Index what `session` logged since its progress (``session_updated``). Returns rows added
        (0 while `warm_up` runs: the session is queued for it)."""
        with self._waiting_lock:
            if not self._ready.is_set():
                self._waiting.add(session)
                return 0
        return self._catch_up([session])

    def forget(self, sessions: Sequence[str]) -> int:
        """`forget.forget` on the live file (an import archive about to be replaced); the caller then
        starts `rebuild_in_background`, which drops the old rows' terms. Returns the rows taken out."""
        with self._catching, self._lock:
            self._forgotten.update(sessions)  # a rebuild under way forgets them in its new file too
            taken = forget(self.db.conn, sessions)
        self.upkeep.due()
        return taken

    def catch_up_many(self, sessions: Sequence[str]) -> int:
        """`catch_up` of several sessions."""
        with self._waiting_lock:
            if not self._ready.is_set():
                self._waiting.update(sessions)
                return 0
        return self._catch_up(list(sessions))

    def catch_up_all(self) -> int:
        """Catch up every session. Returns rows added."""
        return self._catch_up(None)

    def _catch_up(self, sessions: Sequence[str] | None) -> int:
        with self._catching:
            try:
                added = self.db.catch_up_all(sessions, lock=self._lock)
                self.upkeep.due()
                return added
            except LogShrank as exc:
                log.warning("%s; rebuilding the index in the background", exc)
        self._run_in_background(self.rebuild, "index-rebuild")
        return 0

    # Notes -----------------------------------------------------------------------------------------

    def add_notes(self, notes: Sequence[Note], data: bytes) -> None:
        """Index notes just appended to notes.md as `data` (the writer calls this, in append order,
        after the journal commit that wrote them: so it never raises).

        When notes.md is not what the index knew plus `data` (the owner edited it meanwhile), every
        note is indexed again instead. When the index cannot take them (a full disk, a damaged file)
        the failure is logged and the index is `behind`: the next recall (`refresh_notes`) and the next
        start index them again.
        """
        try:
            self._add_notes(notes, data)
            self.upkeep.due()
        except (sqlite3.Error, OSError) as exc:
            self._behind = str(exc)
            log.error(
                "memory-index-behind: %d note(s) were written but not indexed (%s); they are indexed "
                "before the next recall answers",
                len(notes),
                exc,
            )

    @property
    def behind(self) -> str:
        """Why notes memoryd wrote are not in the index yet ("" when the index has every one)."""
        return self._behind

    def _add_notes(self, notes: Sequence[Note], data: bytes) -> None:
        with self._lock:
            now = stat_of(self.notes)
            if now == self._notes_stat:
                return  # a recall's `refresh_notes` saw this append first and indexed it
            if now is None or now[0] != self._notes_bytes + len(data):
                self.sync_notes()
                return
            self._notes_hash.update(data)
            self._notes_bytes += len(data)
            meta = {"notes_sha256": self._notes_hash.hexdigest(), "notes_bytes": str(self._notes_bytes)}
            self.db.add_notes(notes, meta)
            self._notes_stat = now

    def sync_notes(self) -> None:
        """Bring the index's notes in line with notes.md: notes appended since the index last saw
        the file are added; after any other change (a hand edit) every note is indexed again. A
        missing notes.md changes nothing (it is recreated at start; its notes are in the journal)."""
        with self._lock:
            if self._appended_notes():
                return
            data, stat = snapshot(self.notes)
            if stat is None:
                log.warning("%s is missing; the notes in the index stay as they were", self.notes)
                return
            if not sync_index_notes(self.db, data):
                log.info("notes.md was edited by hand; indexing its notes again")
            self._load_notes_state(data, stat)
        self.upkeep.due()

    def _appended_notes(self) -> bool:
        """`notesync.add_appended` on the live file, remembering what it read. False, with nothing
        done, when notes.md is missing or changed otherwise (`sync_notes` then reads it whole)."""
        seen = add_appended(self.db, self.notes)
        if seen is None:
            return False
        self._notes_hash, self._notes_bytes, self._notes_stat = seen
        return True

    def refresh_notes(self) -> None:
        """`sync_notes` when notes.md changed since memoryd last wrote or read it, or when notes could
        not be indexed (`behind`) (recall calls this, so a note the owner deleted by hand is not
        recalled, and a note written while the index could not take it is).

        Raises:
            sqlite3.Error: the index still cannot take them (it stays `behind`).
        """
        if self._behind or stat_of(self.notes) != self._notes_stat:
            self.sync_notes()
            if self._behind:
                log.info("memory-index-behind: the notes are indexed again")
            self._behind = ""

    def _load_notes_state(self, data: bytes, stat: Stat) -> None:
        """What the index has seen of notes.md: `data`, read at `stat`. An append made after that
        read differs from `stat`, so `add_notes` still indexes it."""
        known = int(self.db.meta("notes_bytes") or 0)
        self._notes_hash = hashlib.sha256(data[:known])
        self._notes_bytes = known
        self._notes_stat = stat

    # Rebuilding ------------------------------------------------------------------------------------

    def rebuild(self) -> Counts:
        """Build a new index file from nothing while recall keeps answering, then swap it in.

        Returns:
            What the new index holds.

        Raises:
            Cancelled: memoryd is stopping (the half-built file is left for the next build).
        """
        with self._rebuilding:
            with self._lock:
                self._forgotten.clear()
            fresh = self.path.with_name(self.path.name + ".new")
            delete(fresh)
            db = self._open_file(fresh, bulk=True)
            self._building = db
            try:
                self._fill(db)
                optimize(db.conn)  # one segment per term: recall reads half as much (outside the locks)
                if compact(db.conn, fresh):  # the file again without the pages the merge freed
                    db = self._building = self._open_file(fresh, bulk=True, written=db.written)
                with self._catching, self._lock:
                    forget(db.conn, sorted(self._forgotten))
                    seen = self._fill(db)
                    counts = db.counts()
                    finish_bulk(db.conn)
                    db.conn.close()
                    sync(fresh)  # built without syncs: durable before it is used
                    self._swap_in(fresh)
                    self._load_notes_state(*seen)
            finally:
                self._building = None
                db.conn.close()
        self.rebuild_reason = ""
        log.info("reindexed: %d logs, %d records, %d notes", counts.logs, counts.records, counts.notes)
        return counts

    def building(self) -> dict[str, Any] | None:
        """A build from nothing in progress: ``{"rows": rows written so far, "reason": why ("" for a
        reindex the owner or a withdrawal asked for)}``; None when none runs."""
        db = self._building
        return None if db is None else {"rows": db.written, "reason": self.rebuild_reason}

    def _stale(self) -> None:
        """A hit could not be read back from its log (a log rewritten in place): build the index
        again in the background, at most once every `STALE_REBUILD_EVERY` seconds."""
        now = time.monotonic()
        if self._rebuilding.locked() or now - self._stale_rebuild < STALE_REBUILD_EVERY:
            return
        self._stale_rebuild = now
        log.warning("memory-index-stale: building the index again in the background")
        self.rebuild_in_background()

    def rebuild_in_background(self) -> None:
        """Start `rebuild` on a background thread (after a withdrawal or a reinstatement, so the
        index holds exactly what is eligible); recall filters withdrawn hits meanwhile."""
        self._run_in_background(self._rebuild_logged, "index-rebuild")

    def _rebuild_logged(self) -> None:
        try:
            self.rebuild()
        except Cancelled:
            return
        except Exception:
            log.exception("memory-index-damaged: rebuilding the index failed; run `bxctl reindex`")

    def seal(self) -> None:
        """After an erasure's `rebuild` (seed 003 section 12.3): leave no page of the old index
        anywhere (`filecare.seal`, with every reader closed).

        Raises:
            sqlite3.Error, OSError: when the file cannot be written.
        """
        with self._catching, self._lock, self.readers.closed():
            seal(self.db.conn, self.path)

    def _fill(self, db: IndexDB) -> tuple[bytes, Stat]:
        """Catch `db` up with every session and notes.md; returns the notes.md it saw."""
        db.catch_up_all()
        data, stat = snapshot(self.notes)
        sync_index_notes(db, data)
        return data, stat

    def _swap_in(self, fresh: Path) -> None:
        with self.readers.closed():
            if self._db is not None:
                self._db.conn.close()
                self._db = None
            delete(self.path, ("-wal", "-shm"))
            os.replace(fresh, self.path)
            fsio.fsync_dir(self.path.parent)
            self._db = self._open_file(self.path)

    # Reading ---------------------------------------------------------------------------------------

    def search(self, query: Query, k: int) -> list[Hit]:
        """The best `k` hits for a built query, best first ([] when it has no terms).

        Raises:
            sqlite3.Error: when the file cannot be read.
        """
        if not query.match:
            return []
        return self.readers.search(query, k)

    def counts(self) -> Counts:
        """What the index holds now (read without waiting for a writer)."""
        return self.readers.counts()
