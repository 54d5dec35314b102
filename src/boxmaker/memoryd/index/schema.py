"""The index database's schema and connections (M5a section 6; STYLE 13): the schema and its version
(`SCHEMA`, `SCHEMA_VERSION`; `db` documents the tables), opening a connection for live use or a bulk
build, the one transaction context every write goes through, and the counts of what a database holds.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from boxmaker.memoryd.index.query import TOKENIZER
from boxmaker.proto import fsio

log = logging.getLogger("boxmaker.memoryd.index")

#: The index's schema version, kept in the file's ``PRAGMA user_version``. The index is disposable
#: (made from sessions/ and notes.md), so a file of any other version, older or newer, is not migrated in
#: place: it is deleted and built again at start (`Index.open`). Bump it with any change to `SCHEMA` or to
#: what a row holds (docs/decisions.md, issue 16). 4: a quoted credential is redacted whole (an index of
#: version 3 may hold the words of a quoted passphrase after its first).
SCHEMA_VERSION = 4

#: A new file's tables, made in one transaction with `SCHEMA_VERSION` (`db` says what each holds).
SCHEMA: tuple[str, ...] = (
    """CREATE TABLE logs(
        id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, records INTEGER NOT NULL,
        offset INTEGER NOT NULL, class TEXT NOT NULL, untrusted INTEGER NOT NULL, tail TEXT NOT NULL)""",
    """CREATE TABLE origins(
        rowid INTEGER PRIMARY KEY, log INTEGER NOT NULL, record INTEGER NOT NULL, at INTEGER NOT NULL,
        checked INTEGER NOT NULL, part INTEGER NOT NULL, label INTEGER NOT NULL)""",
    "CREATE TABLE notes(rowid INTEGER PRIMARY KEY, data TEXT NOT NULL)",
    f"CREATE VIRTUAL TABLE hits USING fts5(text, ctx, time, content='', tokenize='{TOKENIZER}')",
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # FTS5 keeps 64 MB of new terms in memory before writing a segment: far faster bulk builds.
    "INSERT INTO hits(hits, rank) VALUES ('hashsize', 67108864)",
)


#: The page cache of a reader connection, in KiB (recall reads through up to two at once).
LIVE_CACHE_KIB = 4096
#: The page cache of the live writer, in KiB: a note's insert, a catch-up and the upkeep's merge steps
#: touch few pages each (the rest comes from the OS's cache), and recall never reads through it.
WRITER_CACHE_KIB = 1024


def fts5_problem() -> str:
    """ "" when Python's SQLite has FTS5 with the porter tokenizer, else a sentence saying what lacks."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61 remove_diacritics 2')")
    except sqlite3.Error as exc:
        return f"Python's SQLite {sqlite3.sqlite_version} has no usable FTS5 ({exc})"
    finally:
        conn.close()
    return ""


class SchemaMismatch(Exception):
    """Raised when an index file is of another schema version than `SCHEMA_VERSION` (it is rebuilt).

    Attributes:
        version: the file's version (0 for files made before versions were kept).
    """

    def __init__(self, version: int) -> None:
        super().__init__(f"the index is of schema version {version}; this memoryd uses {SCHEMA_VERSION}")
        self.version = version


@dataclass(frozen=True, slots=True)
class Counts:
    """What an index holds: session logs read, rows from them, notes."""

    logs: int
    records: int
    notes: int


def connect(path: Path, bulk: bool = False) -> sqlite3.Connection:
    """Open an index file (`check_same_thread` off for the reader pool).

    Live files use WAL, so recall reads while a catch-up writes. A file being built from nothing
    (`bulk`) has no journal and no syncs until `finish_bulk`: a crash leaves a half-built file that
    the next build deletes, and the build is much faster; it is synced before it is renamed into use
    (`filecare.sync`). Either way the file is disposable.
    """
    fsio.check_no_links(path.parent.parent, path)  # never a database outside the home (issue 15 item 11)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60.0)
    conn.execute("PRAGMA page_size=8192")  # only takes effect on a new file
    # a bulk build keeps 64 MB of pages; the live writer 1 MB (the OS caches the file; memoryd stays small)
    conn.execute(f"PRAGMA cache_size=-{65536 if bulk else WRITER_CACHE_KIB}")
    if bulk:
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
    else:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA wal_autocheckpoint={WAL_CAP}")
    return conn


#: FTS5 merges no segments while a file is built from nothing: `optimize` merges them all once at the
#: end (at 1,000,000 records the insert then took 12.5 s instead of 16.5 s, and optimize with VACUUM
#: about the same; issue 16). Nor does a crisis merge run before this many segments of one level (the
#: most FTS5 allows is 1,999; a 64 MB segment each time the pending terms fill `SCHEMA`'s hashsize, so
#: about 15 at 1,000,000 records).
BULK_AUTOMERGE = 0
BULK_CRISISMERGE = 1_000
LIVE_CRISISMERGE = 16
#: A live file never merges inside a write: `upkeep.Upkeep` merges in the gaps between requests, so
#: queries still see few segments (FTS5's ``crisismerge``, 16 segments a level, stays the bound).
LIVE_AUTOMERGE = 0
#: A live writer checkpoints the write-ahead log inside a write only once it holds this many pages
#: (32 MB of 8 KB pages): `upkeep.Upkeep` checkpoints in the gaps between requests, far below it.
WAL_CAP = 4000


def live_settings(conn: sqlite3.Connection) -> None:
    """Set a live file's merging to `LIVE_AUTOMERGE` when it is not (a file made before upkeep, or by
    a build); kept in the file's FTS5 configuration, so this writes only once per file. A file that
    cannot be written now (a full disk) keeps merging inside its writes: slower writes, nothing lost
    (a warning says so; the next start tries again).

    Raises:
        sqlite3.DatabaseError: when the file is not a usable index (the caller moves it aside).
    """
    row = conn.execute("SELECT v FROM hits_config WHERE k = 'automerge'").fetchone()
    if row is None or row[0] != LIVE_AUTOMERGE:
        try:
            conn.execute("INSERT INTO hits(hits, rank) VALUES ('automerge', ?)", (LIVE_AUTOMERGE,))
        except sqlite3.OperationalError as exc:
            log.warning("the index merges inside its writes until it can be written: %s", exc)


def start_bulk(conn: sqlite3.Connection) -> None:
    """Settings for building a migrated file from nothing (see `connect`)."""
    conn.execute("INSERT INTO hits(hits, rank) VALUES ('automerge', ?)", (BULK_AUTOMERGE,))
    conn.execute("INSERT INTO hits(hits, rank) VALUES ('crisismerge', ?)", (BULK_CRISISMERGE,))


def optimize(conn: sqlite3.Connection) -> None:
    """Merge the FTS5 table's segments into one (after a bulk build): a query then reads each term's
    list once, which halves recall's time at 100,000 rows (bench/scale.py; at 1,000,000 records recall's
    p50 was 0.7 ms after it and 2.9 ms without it, bench/peers.py). The merge leaves the old segments'
    pages free (about a tenth of the file): `filecare.compact` then writes the file without them."""
    conn.execute("INSERT INTO hits(hits) VALUES ('optimize')")


def finish_bulk(conn: sqlite3.Connection) -> None:
    """Back to live settings after a bulk build: default merging, WAL, synced."""
    conn.execute("INSERT INTO hits(hits, rank) VALUES ('automerge', ?)", (LIVE_AUTOMERGE,))
    conn.execute("INSERT INTO hits(hits, rank) VALUES ('crisismerge', ?)", (LIVE_CRISISMERGE,))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA wal_autocheckpoint={WAL_CAP}")
    conn.execute(f"PRAGMA cache_size=-{WRITER_CACHE_KIB}")


def migrate(conn: sqlite3.Connection) -> None:
    """Make the tables of a new (empty) file at `SCHEMA_VERSION`, in one transaction; check the version
    of an existing one.

    Raises:
        SchemaMismatch: the file holds tables of another version (the caller deletes and rebuilds it).
        sqlite3.DatabaseError: the file is not a usable database.
    """
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version == SCHEMA_VERSION:
        return
    if conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]:
        raise SchemaMismatch(version)
    with transaction(conn):
        for sql in SCHEMA:
            conn.execute(sql)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


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


def counts_of(conn: sqlite3.Connection) -> Counts:
    """Logs read, rows from sessions and rows from notes of an index file."""
    logs = conn.execute("SELECT count(*) FROM logs").fetchone()[0]
    notes = conn.execute("SELECT count(*) FROM notes").fetchone()[0]
    records = conn.execute("SELECT count(*) FROM origins").fetchone()[0]
    return Counts(int(logs), int(records), int(notes))


#: The highest rowid the index has used (0 when empty): of the session rows, the notes, and the search
#: table's own rows (`forget` leaves a forgotten session's search rows in place; their rowids are never
#: given again).
LAST_ROWID = (
    "SELECT max((SELECT coalesce(max(rowid), 0) FROM origins), (SELECT coalesce(max(rowid), 0) FROM notes),"
    " (SELECT coalesce(max(id), 0) FROM hits_docsize))"
)


def last_rowid(conn: sqlite3.Connection) -> int:
    """The highest rowid of the index (`LAST_ROWID`; session rows and notes share the FTS5 table's
    rowids); 0 when empty."""
    return int(conn.execute(LAST_ROWID).fetchone()[0])


@contextmanager
def tail_reader(conn: sqlite3.Connection) -> Iterator[Callable[[str], str]]:
    """A function reading a log's stored tail (the JSON of `logs.tail`) by name, on a read-only
    connection of its own opened when first asked (for the thread that walks logs while `conn` writes
    on another); "[]" for a log the file does not hold, or an index without a file.

    Raises:
        sqlite3.Error: from the function, when the file cannot be read.
    """
    # as bytes: a home's path need not be UTF-8 (SQLite hands back the bytes it opened)
    found = conn.execute("SELECT CAST(file AS BLOB) FROM pragma_database_list WHERE name = 'main'").fetchone()
    path = Path(os.fsdecode(found[0])) if found is not None and found[0] else None
    reader: sqlite3.Connection | None = None

    def tail(name: str) -> str:
        nonlocal reader
        if path is None:
            return "[]"
        if reader is None:
            reader = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, check_same_thread=False)
        row = reader.execute("SELECT tail FROM logs WHERE name = ?", (name,)).fetchone()
        return str(row[0]) if row is not None else "[]"

    try:
        yield tail
    finally:
        if reader is not None:
            reader.close()
