"""One index database: its schema, and what goes into it (M5a section 6; DESIGN 7 and 11).

Indexed from session logs (every epoch file ``sessions/<id>/N.jsonl``, in epoch order, the session's
label carried across epochs) and import archives (``imports/<source>/<id>.jsonl``, epoch 0 of session
``<id>``; `proto.archives`): the content of `user` records (with the speaker's name), of `assistant`
records that have content, each tool call as ``name arguments``, and `tool_summary` content. Never
tool results, never reasoning. From notes.md: every entry, with the label its header gives.

Each row gets the label in force when its record was written: the stricter of ``private`` and every
tool result before it. A row whose class is above ``max_class`` is not indexed at all, and its text
never reaches another row's context.

Withdrawn content is never indexed (seed 003 section 12.2): `exclusion` (read at each catch-up) names
withdrawn sessions, records and notes, which are skipped; a reinstatement rebuilds the index.

Rows are only ever appended: session logs and notes.md are append-only. When notes.md was changed
other than by appending, or a log shrank, the caller rebuilds the index from nothing (`Index.rebuild`).

Schema (`schema.SCHEMA`, version `schema.SCHEMA_VERSION` in ``PRAGMA user_version``)::

    logs(id, name, records, offset, class, untrusted, tail)   each log read: where reading resumes
    origins(rowid, log, record, at, checked, part, label)   a session row: where its text is (`walk.Row`)
    notes(rowid, data)   a note: JSON [key, kind, role, session, epoch, record, time, speaker, origin,
                         class, untrusted, text]
    hits USING fts5(text, ctx, time; contentless; porter unicode61)
    meta(key, value)

A session row keeps integers only: its text is read back from its log line when it is a hit
(`rowtext`), which the log keeps (append-only; an erasure rebuilds the index). Notes keep their text
(notes.md is edited by hand; the text also deletes a note's row from the contentless table).

`hits.text` is the record's text (``speaker: text`` for a user turn with a speaker), `hits.ctx` the
two indexed texts before it in the same session (document expansion; its stop words as one filler token
each, `query.stop_filled`), `hits.time` its date in words.
CJK runs are stored as overlapping two-character pieces (`query.cjk_bigrams`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from boxmaker.memoryd.check.secrets import redact
from boxmaker.memoryd.files.notes import Note
from boxmaker.memoryd.index import logfiles
from boxmaker.memoryd.index.batches import Batch, Encoded
from boxmaker.memoryd.index.prefetch import prefetch
from boxmaker.memoryd.index.schema import Counts, counts_of, last_rowid, tail_reader, transaction
from boxmaker.memoryd.index.walk import Walk, line_check, searchable_text, time_of, walk_records
from boxmaker.memoryd.withdrawal.exclusion import Exclusion
from boxmaker.proto.fsio import complete_lines
from boxmaker.proto.labels import DataClass
from boxmaker.proto.records import Record, decode_record, decode_records

log = logging.getLogger("boxmaker.memoryd.index")

T = TypeVar("T")


#: Rows written in one transaction at most (FTS5 builds faster in large transactions; a bulk build
#: overlaps reading the next batch with writing this one).
BATCH_ROWS = 20_000
FIRST_BATCH_ROWS = 1_250


#: How much of a log is read at a time, in bytes.
CHUNK_BYTES = 4 * 1024 * 1024


@dataclass(slots=True)
class _LogState:
    """Reading one log: where it resumes, the walk so far (`walk`: for a log indexed before, made from
    its progress row's tail only when asked, so a catch-up of thousands of unchanged logs holds none of
    their tails), and whether a bad line stopped it."""

    session: str
    epoch: int
    name: str
    id: int
    path: str
    records: int
    offset: int
    resumed: Walk | Callable[[], Walk]
    known: bool = False
    damaged: bool = False
    #: The log's size when reading it started (`_start`): a log indexed to there is not opened.
    size: int = -1

    @property
    def walk(self) -> Walk:
        """The walk so far (read from the index the first time, for a log indexed before)."""
        if not isinstance(self.resumed, Walk):
            self.resumed = self.resumed()
        return self.resumed


class IndexDB:
    """Writes one index file. Not thread-safe: the caller serialises writers.

    Rows are gathered per log and written in transactions of up to `BATCH_ROWS` rows, each table's
    rows in one statement over a JSON array (``json_each``), so SQLite works without holding Python's
    lock; a bulk catch-up reads and walks the next logs on a second thread meanwhile (`prefetch`).

    Args:
        conn: an open connection (see `connect`), already migrated.
        sessions: the sessions folder to read logs from.
        max_class: rows above this class are not indexed.
        cancel: once set, a catch-up in progress stops between batches (`Cancelled`).
        exclusion: what is withdrawn now (called at each catch-up and notes batch); withdrawn
            sessions, records and notes are not indexed.
        imports: the import archives' folder (None: none are indexed).
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        sessions: Path,
        max_class: DataClass,
        cancel: threading.Event | None = None,
        exclusion: Callable[[], Exclusion] | None = None,
        *,
        imports: Path | None = None,
    ) -> None:
        self.conn = conn
        self.imports = imports
        self.exclusion = exclusion or Exclusion
        self.cancel = cancel or threading.Event()
        self.sessions = sessions
        self._sessions = str(sessions)
        self.max_class = max_class
        self._reported: set[tuple[str, int]] = set()
        self._next = last_rowid(conn) + 1
        self._log_ids = {str(name): int(ident) for ident, name in conn.execute("SELECT id, name FROM logs")}
        self._last_log = max(self._log_ids.values(), default=0)
        #: Rows this writer has written (a build's progress, read from other threads).
        self.written = 0

    def catch_up(self, session: str) -> int:
        """Index the records of `session` past its progress, every epoch. Returns rows added.

        Raises:
            LogShrank: a log is shorter than what was indexed (the caller rebuilds).
        """
        return self.catch_up_all([session])

    def catch_up_all(
        self, sessions: Sequence[str] | None = None, lock: AbstractContextManager[Any] | None = None
    ) -> int:
        """Catch up `sessions` (default: every session), in large transactions. Returns rows added.

        Args:
            sessions: the sessions to read (None: every session folder).
            lock: held around each use of the connection (so other writers, such as notes being
                appended, go between batches); no other catch-up may run meanwhile.

        Raises:
            LogShrank: see `catch_up`.
            Cancelled: `cancel` was set.
        """
        guard = lock if lock is not None else contextlib.nullcontext()
        names = logfiles.session_ids(self.sessions, self.imports) if sessions is None else list(sessions)
        select = "SELECT name, records, offset, class, untrusted FROM logs"  # tails when needed
        with guard:
            if len(names) == 1:  # the logs of session S are named "S/N.jsonl": from "S/" up to "S0"
                rows = self.conn.execute(
                    f"{select} WHERE name >= ? AND name < ?", (f"{names[0]}/", f"{names[0]}0")
                )
            else:
                rows = self.conn.execute(select)
            progress = {str(row[0]): tuple(row[1:]) for row in rows}
        with tail_reader(self.conn) as tails:
            batches = self._batches(names, progress, tails)
            added = 0
            for batch in prefetch(batches) if len(names) > 1 else batches:
                with guard:
                    added += self._flush(batch)
        return added

    def _batches(
        self, names: Sequence[str], progress: dict[str, tuple[Any, ...]], tails: Callable[[str], str]
    ) -> Iterator[Encoded]:
        """Rows of every session past its progress, in batches (no SQL). The first batches are
        small, so writing starts early, then each doubles up to `BATCH_ROWS`. Logs are read in
        chunks of `CHUNK_BYTES`, so a huge log neither fills memory nor delays a stop."""
        batch = Batch()
        size = FIRST_BATCH_ROWS
        excluded = self.exclusion()
        for session in names:
            if excluded.session(session):
                continue
            carry: _LogState | None = None
            for epoch in logfiles.epochs(self.sessions, self.imports, session):
                log_state = self._start(session, epoch, carry, progress, tails)
                if log_state is None:
                    continue
                while True:
                    if self.cancel.is_set():
                        raise Cancelled
                    more = self._collect(log_state, batch, excluded)
                    if len(batch) >= size:
                        yield batch.encoded()
                        batch = Batch()
                        size = min(2 * size, BATCH_ROWS)
                    if not more:
                        break
                if log_state.damaged:
                    break  # a later epoch's label depends on the records this one could not read
                carry = log_state  # its walk is read only if the next epoch is new
        yield batch.encoded()

    def _start(
        self,
        session: str,
        epoch: int,
        carry: _LogState | None,
        progress: dict[str, tuple[Any, ...]],
        tails: Callable[[str], str],
    ) -> _LogState | None:
        """Where reading a log resumes: its progress, or the start with the previous epoch's label.

        Raises:
            LogShrank: the log is shorter than what was indexed.
        """
        name = f"{session}/{epoch}.jsonl"
        path = logfiles.log_file(self._sessions, self.imports, session, epoch)
        row = progress.get(name)
        ident = self._log_ids.get(name)
        if ident is None:
            ident = self._log_ids[name] = self._last_log = self._last_log + 1
        if row is None:
            walk = carry.walk.copy() if carry is not None else Walk()
            state = _LogState(session, epoch, name, ident, path, 0, 0, walk)
        else:
            rank, untrusted = DataClass(row[2]).rank, bool(row[3])

            def resumed() -> Walk:
                return Walk(rank, untrusted, json.loads(tails(name)))

            state = _LogState(
                session, epoch, name, ident, path, int(row[0]), int(row[1]), resumed, known=True
            )
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            return None
        if size < state.offset:
            raise LogShrank(f"{path} is {size:,} bytes, shorter than the {state.offset:,} already indexed")
        state.size = size
        return state

    def _collect(self, state: _LogState, batch: Batch, excluded: Exclusion) -> bool:
        """Walk the next chunk of a log into `batch`, leaving out withdrawn records. Returns True
        when more of the log is left. A log indexed before and not grown since `_start` is not opened
        (a build's last catch-up looks at every log while the file is held out of catch-ups)."""
        if state.known and state.size == state.offset:
            return False
        try:
            with open(state.path, "rb") as handle:
                handle.seek(state.offset)
                data = handle.read(CHUNK_BYTES)
                if len(data) == CHUNK_BYTES and b"\n" not in data:
                    data += handle.readline()  # one line longer than a chunk: read it whole
        except FileNotFoundError:
            return False
        lines, _ = complete_lines(data)
        whole = decode_records(lines)
        if whole is not None:  # every line a record (nearly always): no loop in Python
            decoded = whole
            sizes = [len(line) + 1 for line in lines]
            starts = itertools.accumulate(sizes, initial=state.offset)  # one more than the lines
            lines_at = list(zip(starts, map(line_check, lines), strict=False))
            consumed = sum(sizes)
        else:
            decoded, lines_at, consumed = self._decode_lines(state, lines)
        if decoded or not state.known:
            walk_records(
                state.id,
                state.records,
                decoded,
                lines_at,
                state.walk,
                max_class=self.max_class,
                rows=batch.rows,
                skip=_skip(excluded, state.session, state.epoch) if excluded else None,
            )
            state.records += len(decoded)
            state.offset += consumed
            state.known = True
            batch.progress.append(
                (
                    state.id,
                    state.name,
                    state.records,
                    state.offset,
                    state.walk.data_class,
                    int(state.walk.untrusted),
                    json.dumps(state.walk.tail),
                )
            )
        return bool(decoded) and not state.damaged and len(data) >= CHUNK_BYTES

    def _decode_lines(
        self, state: _LogState, lines: list[bytes]
    ) -> tuple[list[Record], list[tuple[int, int]], int]:
        """The records of `lines` one by one, up to the first that is not a valid record (reported,
        and the log marked damaged); with each line's offset and `line_check`, and the bytes read."""
        decoded: list[Record] = []
        lines_at: list[tuple[int, int]] = []
        consumed = 0
        for number, line in enumerate(lines, start=state.records + 1):
            try:
                decoded.append(decode_record(line))
            except ValueError as exc:
                self._report(state.path, number, str(exc))
                state.damaged = True
                break
            lines_at.append((state.offset + consumed, line_check(line)))
            consumed += len(line) + 1
        return decoded, lines_at, consumed

    def _flush(self, batch: Encoded, meta: dict[str, str] | None = None) -> int:
        """Write one batch (and `meta` values) in one transaction."""
        with transaction(self.conn):
            added = self._write(batch)
            for key, value in (meta or {}).items():
                self.set_meta(key, value)
        return added

    def _write(self, batch: Encoded) -> int:
        """Write one batch inside the caller's transaction: the session rows and the searchable
        columns each with one statement over a JSON array (``json_each``: SQLite then inserts the
        whole batch without taking Python's lock, which the producer thread holds while it walks the
        next logs; with one `executemany` per table a bulk build at 100,000 rows took 35% longer),
        the progress of each log the same way, notes with `executemany`."""
        first = self._next
        added = batch.count
        conn = self.conn
        if batch.sessions:
            conn.execute(
                "INSERT INTO origins(rowid, log, record, at, checked, part, label) SELECT key + ?,"
                " value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5"
                " FROM json_each(CAST(? AS TEXT))",
                (first, batch.origins),
            )
        if batch.notes:
            conn.executemany(
                "INSERT INTO notes(rowid, data) VALUES (?, ?)",
                list(enumerate(batch.notes, first + batch.sessions)),
            )
        if added:
            conn.execute(
                "INSERT INTO hits(rowid, text, ctx, time)"
                " SELECT key + ?, value ->> 0, value ->> 1, value ->> 2 FROM json_each(CAST(? AS TEXT))",
                (first, batch.searchable),
            )
        conn.execute(  # one statement, as the rows: no return to Python's lock per log (1,000s a batch)
            "INSERT OR REPLACE INTO logs(id, name, records, offset, class, untrusted, tail) SELECT"
            " value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, value ->> 6"
            " FROM json_each(CAST(? AS TEXT))",
            (batch.progress,),
        )
        self._next = first + added
        self.written += added
        return added

    def _report(self, path: str, line: int, why: str) -> None:
        if (path, line) not in self._reported:
            self._reported.add((path, line))
            log.warning("skipping the rest of %s from line %d: not a valid record (%s)", path, line, why)

    # Notes -------------------------------------------------------------------------------------------

    def _notes_batch(self, notes: Sequence[Note]) -> Encoded:
        batch = Batch()
        excluded = self.exclusion()
        for note in notes:
            if note.label.data_class > self.max_class or excluded.note(note):
                continue
            time = f"{note.time[:16]}:00Z" if note.time else ""
            batch.notes.append(
                (
                    note.key,
                    "note",
                    note.kind,
                    note.session,
                    None,
                    note.position,
                    time,
                    "",
                    note.source,
                    note.label.data_class.value,
                    int(note.label.untrusted),
                    redact(note.text),
                )
            )
            batch.rows.searchable.append((searchable_text(redact(note.text)), "", time_of(time)))
        return batch.encoded()

    def add_notes(self, notes: Sequence[Note], meta: dict[str, str] | None = None) -> int:
        """Index notes appended to notes.md, and set `meta` (what notes.md is now), in one
        transaction. Returns how many were indexed (not above max_class)."""
        count = int(self.meta("notes_count") or 0) + len(notes)
        return self._flush(self._notes_batch(notes), {**(meta or {}), "notes_count": str(count)})

    def replace_notes(self, notes: Sequence[Note], meta: dict[str, str] | None = None) -> int:
        """Take every note out of the index and index `notes` instead (notes.md edited by hand), in
        one transaction with `meta`.

        The table is contentless, so each row is deleted with the values it was indexed with,
        made again from the text kept in `notes`.
        """
        rows = self.conn.execute("SELECT rowid, data FROM notes").fetchall()
        batch = self._notes_batch(notes)
        with transaction(self.conn):
            for rowid, data in rows:
                source = json.loads(data)
                self.conn.execute(
                    "INSERT INTO hits(hits, rowid, text, ctx, time) VALUES ('delete', ?, ?, '', ?)",
                    (rowid, searchable_text(source[11]), time_of(source[6])),
                )
            self.conn.execute("DELETE FROM notes")
            # rows left the search table: remembered document frequencies are stale (`search.Frequencies`)
            self.set_meta("generation", str(int(self.meta("generation") or 0) + 1))
            added = self._write(batch)
            for key, value in {**(meta or {}), "notes_count": str(len(notes))}.items():
                self.set_meta(key, value)
        return added

    def meta(self, key: str) -> str | None:
        """A value of the meta table, or None."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """Set a value of the meta table (inside the caller's transaction, or on its own)."""
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def counts(self) -> Counts:
        """Logs read, rows from sessions, rows from notes."""
        return counts_of(self.conn)


def _skip(excluded: Exclusion, session: str, epoch: int) -> Callable[[int], bool]:
    """`walk_records`'s skip for one log: record numbers are 0-based, anchors' lines 1-based."""
    return lambda number: excluded.record(session, epoch, number + 1)


class Cancelled(Exception):
    """Raised when a catch-up stops because memoryd is stopping."""


class LogShrank(Exception):
    """Raised when a session log is shorter than the part already indexed (it was rewritten)."""
