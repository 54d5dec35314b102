"""One index database: its schema, and what goes into it (M5a section 6; DESIGN 7 and 11).

Indexed from session logs (every epoch file ``sessions/<id>/N.jsonl``, in epoch order, the session's
label carried across epochs): the content of `user` records (with the speaker's name), of `assistant`
records that have content, each tool call as ``name arguments``, and `tool_summary` content. Never
tool results, never reasoning. From notes.md: every entry, with the label its header gives.

Each row gets the label in force when its record was written: the stricter of ``private`` and every
tool result before it. A row whose class is above ``max_class`` is not indexed at all, and its text
never reaches another row's context.

Rows are only ever appended: session logs and notes.md are append-only. When notes.md was changed
other than by appending, or a log shrank, the caller rebuilds the index from nothing (`Index.rebuild`).

Schema (an ordered list of named migrations, STYLE 13)::

    sources(rowid, key, kind, role, session, epoch, record, time, speaker, origin, class, untrusted, text)
    hits USING fts5(text, ctx, time; contentless; porter unicode61)
    progress(log, records, offset, class, untrusted, tail)
    meta(key, value)

`hits.text` is the record's text (``speaker: text`` for a user turn with a speaker), `hits.ctx` the
two indexed texts before it in the same session (document expansion), `hits.time` its date in words.
CJK runs are stored as overlapping two-character pieces (`query.cjk_bigrams`).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from boxmaker.memoryd.notes import Note
from boxmaker.memoryd.query import TOKENIZER, cjk_bigrams, time_words
from boxmaker.proto.fsio import complete_lines
from boxmaker.proto.ids import is_session_id
from boxmaker.proto.labels import SESSION_START_LABEL, DataClass, Label
from boxmaker.proto.records import Assistant, ToolResult, ToolSummary, User, decode_record

log = logging.getLogger("boxmaker.memoryd.index")

MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "0001-sources",
        """CREATE TABLE sources(
            rowid INTEGER PRIMARY KEY, key TEXT NOT NULL, kind TEXT NOT NULL, role TEXT NOT NULL,
            session TEXT NOT NULL, epoch INTEGER, record INTEGER, time TEXT NOT NULL,
            speaker TEXT NOT NULL, origin TEXT NOT NULL, class TEXT NOT NULL,
            untrusted INTEGER NOT NULL, text TEXT NOT NULL)""",
    ),
    (
        "0002-hits",
        f"CREATE VIRTUAL TABLE hits USING fts5(text, ctx, time, content='', tokenize='{TOKENIZER}')",
    ),
    (
        "0003-progress",
        """CREATE TABLE progress(
            log TEXT PRIMARY KEY, records INTEGER NOT NULL, offset INTEGER NOT NULL,
            class TEXT NOT NULL, untrusted INTEGER NOT NULL, tail TEXT NOT NULL)""",
    ),
    ("0004-meta", "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)"),
)

#: How many indexed texts before a row, in the same session, go into its context column.
CONTEXT_ROWS = 2


class SchemaMismatch(Exception):
    """Raised when the database holds migrations this version does not know (rebuild it)."""


@dataclass(frozen=True, slots=True)
class Counts:
    """What an index holds: session logs read, rows from them, notes."""

    logs: int
    records: int
    notes: int


@dataclass(frozen=True, slots=True)
class Row:
    """One indexed row: its source (`sources`) and its searchable text; `shown` is what hits show."""

    key: str
    kind: str
    role: str
    session: str
    epoch: int | None
    record: int | None
    time: str
    speaker: str
    origin: str
    label: Label
    shown: str
    text: str


@dataclass(slots=True)
class _Walk:
    """The state of walking one log: the label so far and the texts before (for context)."""

    label: Label
    tail: list[str] = field(default_factory=list)


def connect(path: Path) -> sqlite3.Connection:
    """Open an index file (WAL, autocommit off; `check_same_thread` off for the reader pool)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def migrate(conn: sqlite3.Connection) -> None:
    """Apply the migrations this database lacks, in order, each in its own transaction.

    Raises:
        SchemaMismatch: the database has migrations this version does not know.
        sqlite3.DatabaseError: the file is not a usable database.
    """
    conn.execute("CREATE TABLE IF NOT EXISTS migrations(name TEXT PRIMARY KEY)")
    done = {row[0] for row in conn.execute("SELECT name FROM migrations")}
    unknown = done - {name for name, _ in MIGRATIONS}
    if unknown:
        raise SchemaMismatch(f"unknown migrations {sorted(unknown)}")
    for name, sql in MIGRATIONS:
        if name not in done:
            with transaction(conn):
                conn.execute(sql)
                conn.execute("INSERT INTO migrations(name) VALUES (?)", (name,))


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction: committed on success, rolled back on any error (STYLE 13)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class IndexDB:
    """Writes one index file. Not thread-safe: the caller serialises writers.

    Args:
        conn: an open connection (see `connect`), already migrated.
        sessions: the sessions folder to read logs from.
        max_class: rows above this class are not indexed.
    """

    def __init__(self, conn: sqlite3.Connection, sessions: Path, max_class: DataClass) -> None:
        self.conn = conn
        self.sessions = sessions
        self.max_class = max_class
        self._reported: set[tuple[str, int]] = set()

    # Session logs --------------------------------------------------------------------------------

    def session_ids(self) -> list[str]:
        """Every session folder with a valid id, sorted."""
        try:
            names = sorted(p.name for p in self.sessions.iterdir() if p.is_dir())
        except FileNotFoundError:
            return []
        for name in names:
            if not is_session_id(name):
                log.warning("ignoring %s: not a session id", self.sessions / name)
        return [n for n in names if is_session_id(n)]

    def epochs(self, session: str) -> list[int]:
        """The epoch numbers of a session's logs, in order."""
        folder = self.sessions / session
        try:
            found = [p.stem for p in folder.glob("*.jsonl")]
        except OSError:
            return []
        return sorted(
            int(stem) for stem in found if stem.isdigit() and (stem == "0" or not stem.startswith("0"))
        )

    def catch_up(self, session: str) -> int:
        """Index the records of `session` past its progress, every epoch. Returns rows added.

        Raises:
            LogShrank: a log is shorter than what was indexed (the caller rebuilds).
        """
        added = 0
        carry: _Walk | None = None
        for epoch in self.epochs(session):
            rows, carry = self._catch_up_log(session, epoch, carry)
            added += rows
        return added

    def _catch_up_log(self, session: str, epoch: int, carry: _Walk | None) -> tuple[int, _Walk]:
        name = f"{session}/{epoch}.jsonl"
        path = self.sessions / name
        row = self.conn.execute(
            "SELECT records, offset, class, untrusted, tail FROM progress WHERE log = ?", (name,)
        ).fetchone()
        if row is None:
            records, offset = 0, 0
            walk = carry or _Walk(SESSION_START_LABEL)
            walk = _Walk(walk.label, list(walk.tail))
        else:
            records, offset = row[0], row[1]
            walk = _Walk(Label(DataClass(row[2]), bool(row[3])), json.loads(row[4]))
        try:
            with path.open("rb") as handle:
                size = handle.seek(0, 2)
                if size < offset:
                    raise LogShrank(f"{path} is {size:,} bytes, shorter than the {offset:,} already indexed")
                handle.seek(offset)
                data = handle.read()
        except FileNotFoundError:
            return 0, walk
        lines, tail = complete_lines(data)
        added = 0
        consumed = 0
        with transaction(self.conn):
            for number, line in enumerate(lines, start=records):
                try:
                    record = decode_record(line)
                except ValueError as exc:
                    self._report(path, number + 1, str(exc))
                    break
                added += self._index_record(session, epoch, number, record, walk)
                consumed += len(line) + 1
                records += 1
            self.conn.execute(
                "INSERT OR REPLACE INTO progress(log, records, offset, class, untrusted, tail)"
                " VALUES (?,?,?,?,?,?)",
                (
                    name,
                    records,
                    offset + consumed,
                    walk.label.data_class.value,
                    int(walk.label.untrusted),
                    json.dumps(walk.tail[-CONTEXT_ROWS:]),
                ),
            )
        del tail
        return added, walk

    def _report(self, path: Path, line: int, why: str) -> None:
        if (str(path), line) not in self._reported:
            self._reported.add((str(path), line))
            log.warning("skipping the rest of %s from line %d: not a valid record (%s)", path, line, why)

    def _index_record(self, session: str, epoch: int, number: int, record: object, walk: _Walk) -> int:
        if isinstance(record, ToolResult):
            walk.label = walk.label.stricter(record.label)
            return 0
        base = Row(
            f"session/{session}/{epoch}/{number}",
            "turn",
            "user",
            session,
            epoch,
            number,
            "",
            "",
            "",
            walk.label,
            "",
            "",
        )
        if isinstance(record, User):
            speaker = record.speaker or ""
            text = f"{speaker}: {record.content}" if speaker else record.content
            row = replace(base, time=record.time, speaker=speaker, shown=record.content, text=text)
            return self._add(row, walk, context=True)
        if isinstance(record, Assistant):
            added = 0
            said = replace(base, role="assistant", time=record.time)
            if record.content and record.content.strip():
                added += self._add(
                    replace(said, shown=record.content, text=record.content), walk, context=True
                )
            for i, call in enumerate(record.tool_calls):
                text = f"{call.name} {call.arguments}"
                called = replace(said, key=f"{base.key}/{i}", role="call", shown=text, text=text)
                added += self._add(called, walk, context=False)
            return added
        if isinstance(record, ToolSummary):
            row = replace(
                base,
                kind="summary",
                role="summary",
                time=record.time,
                speaker=record.call,
                label=walk.label.stricter(record.label),
                shown=record.content,
                text=record.content,
            )
            return self._add(row, walk, context=False)
        return 0

    def _add(self, row: Row, walk: _Walk, context: bool) -> int:
        if row.label.data_class > self.max_class:
            return 0
        self._insert(row, "\n".join(walk.tail[-CONTEXT_ROWS:]))
        if context:
            walk.tail = [*walk.tail[-(CONTEXT_ROWS - 1) :], row.text]
        return 1

    def _insert(self, row: Row, ctx: str) -> None:
        cursor = self.conn.execute(
            "INSERT INTO sources(key, kind, role, session, epoch, record, time, speaker, origin, class,"
            " untrusted, text) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                row.key,
                row.kind,
                row.role,
                row.session,
                row.epoch,
                row.record,
                row.time,
                row.speaker,
                row.origin,
                row.label.data_class.value,
                int(row.label.untrusted),
                row.shown,
            ),
        )
        self.conn.execute(
            "INSERT INTO hits(rowid, text, ctx, time) VALUES (?,?,?,?)",
            (cursor.lastrowid, cjk_bigrams(row.text), cjk_bigrams(ctx), _time_words(row.time)),
        )

    # Notes -------------------------------------------------------------------------------------------

    def add_notes(self, notes: Sequence[Note]) -> int:
        """Index notes (appended to notes.md). Returns how many were indexed (not above max_class)."""
        added = 0
        with transaction(self.conn):
            for note in notes:
                if note.label.data_class > self.max_class:
                    continue
                time = f"{note.time[:16]}:00Z" if note.time else ""
                row = Row(
                    note.key,
                    "note",
                    note.kind,
                    note.session,
                    None,
                    note.position,
                    time,
                    "",
                    note.source,
                    note.label,
                    note.text,
                    note.text,
                )
                self._insert(row, "")
                added += 1
            noted = self.meta("notes_count")
            self.set_meta("notes_count", str(int(noted or 0) + len(notes)))
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
        logs = self.conn.execute("SELECT count(*) FROM progress").fetchone()[0]
        notes = self.conn.execute("SELECT count(*) FROM sources WHERE kind = 'note'").fetchone()[0]
        total = self.conn.execute("SELECT count(*) FROM sources").fetchone()[0]
        return Counts(int(logs), int(total - notes), int(notes))


class LogShrank(Exception):
    """Raised when a session log is shorter than the part already indexed (it was rewritten)."""


def _time_words(time: str) -> str:
    try:
        return time_words(dt.date.fromisoformat(time[:10]))
    except ValueError:
        return ""
