"""The index database's schema and connections (M5a section 6; STYLE 13): the ordered list of named
migrations (`MIGRATIONS`; `db` documents the tables), opening a connection for live use or a bulk
build, the one transaction context every write goes through, and the counts of what a database holds.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from boxmaker.memoryd.index.query import TOKENIZER
from boxmaker.proto import fsio

MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "0001-sources",
        "CREATE TABLE sources(rowid INTEGER PRIMARY KEY, kind TEXT NOT NULL, data TEXT NOT NULL)",
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
    # FTS5 keeps 64 MB of new terms in memory before writing a segment: far faster bulk builds.
    ("0005-hits-hashsize", "INSERT INTO hits(hits, rank) VALUES ('hashsize', 67108864)"),
)


#: The page cache of a live connection, in KiB (readers and the live writer).
LIVE_CACHE_KIB = 16384


class SchemaMismatch(Exception):
    """Raised when the database holds migrations this version does not know (rebuild it)."""


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
    the next build deletes, and the build is much faster. Either way the file is disposable.
    """
    fsio.check_no_links(path.parent.parent, path)  # never a database outside the home (issue 15 item 11)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60.0)
    conn.execute("PRAGMA page_size=8192")  # only takes effect on a new file
    # a bulk build keeps 64 MB of pages; a live file 16 MB (the OS caches the file; memoryd stays small)
    conn.execute(f"PRAGMA cache_size=-{65536 if bulk else LIVE_CACHE_KIB}")
    if bulk:
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
    else:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    return conn


#: FTS5 merges segments less often while a file is built from nothing (faster); live files merge
#: at the default, so queries see few segments.
BULK_AUTOMERGE = 16


LIVE_AUTOMERGE = 4


def start_bulk(conn: sqlite3.Connection) -> None:
    """Settings for building a migrated file from nothing (see `connect`)."""
    conn.execute("INSERT INTO hits(hits, rank) VALUES ('automerge', ?)", (BULK_AUTOMERGE,))


def optimize(conn: sqlite3.Connection) -> None:
    """Merge the FTS5 table's segments into one (after a bulk build): a query then reads each term's
    list once, which halves recall's time at 100,000 rows (bench/scale.py)."""
    conn.execute("INSERT INTO hits(hits) VALUES ('optimize')")


def finish_bulk(conn: sqlite3.Connection) -> None:
    """Back to live settings after a bulk build: default merging, WAL, synced."""
    conn.execute("INSERT INTO hits(hits, rank) VALUES ('automerge', ?)", (LIVE_AUTOMERGE,))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA cache_size=-{LIVE_CACHE_KIB}")


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


def counts_of(conn: sqlite3.Connection) -> Counts:
    """Logs read, rows from sessions and rows from notes of an index file."""
    logs = conn.execute("SELECT count(*) FROM progress").fetchone()[0]
    notes = conn.execute("SELECT count(*) FROM sources WHERE kind = 'note'").fetchone()[0]
    total = conn.execute("SELECT count(*) FROM sources").fetchone()[0]
    return Counts(int(logs), int(total - notes), int(notes))
