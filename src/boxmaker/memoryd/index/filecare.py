"""The index file's own care (M5a section 6; seed 003 section 12.3): a file deleted with its -wal and
-shm, a damaged file moved aside, a built file written again without its free pages and made durable
before it is used, and a file sealed after an erasure so no page of the old index is left anywhere."""

from __future__ import annotations

import datetime as dt
import logging
import os
import sqlite3
from pathlib import Path

from boxmaker.proto import fsio

log = logging.getLogger("boxmaker.memoryd.index")


#: What a build that a crash interrupted can leave beside ``<index>.new``: its journals and the copy
#: `compact` makes, with that copy's rollback journal (a kill -9 during ``VACUUM INTO``).
BUILD_LEFTOVERS = ("", "-journal", "-wal", "-shm", "-compact", "-compact-journal")


def delete(path: Path, suffixes: tuple[str, ...] = ("", "-wal", "-shm")) -> None:
    """Delete an index file and its -wal and -shm (or the given `suffixes` of its name); missing ones
    are fine.

    Raises:
        OSError: when one cannot be deleted.
    """
    for suffix in suffixes:
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def move_aside(path: Path, why: object) -> None:
    """Rename the index file at `path` (and its -wal and -shm) to ``<name>.damaged-<UTC time>``, logging
    why (runbook memory-index-damaged); the caller builds a new one.

    Raises:
        OSError: when a file cannot be renamed.
    """
    aside = path.with_name(f"{path.name}.damaged-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%SZ}")
    log.error("memory-index-damaged: %s (%s); moved it to %s and rebuilding", path, why, aside)
    for suffix in ("", "-wal", "-shm"):
        source = Path(str(path) + suffix)
        if source.exists():
            os.replace(source, Path(str(aside) + suffix))


def compact(conn: sqlite3.Connection, path: Path) -> bool:
    """Write the file `conn` is the only connection to (`path`, a build's, never the live one) again
    without its free pages, as SQLite's ``VACUUM INTO`` copies it: into ``<path>-compact`` (made 0600
    first), which replaces `path` once `conn` is closed. One copy, in the index's folder: a ``VACUUM``
    makes one in SQLite's temporary folder and copies it back (at 1,000,000 records 0.62 s instead of
    0.37 s; issue 16). Returns True when `path` is the copy (`conn` closed: the caller opens it again);
    False, with `conn` open and `path` as it was, when the copy cannot be made (a full disk; a warning
    says so: the file keeps its free pages).

    Raises:
        OSError: when the copy cannot be renamed over `path`.
    """
    copy = Path(f"{path}-compact")
    try:
        delete(copy, ("",))
        os.close(fsio.open_nofollow(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        conn.execute("VACUUM INTO CAST(? AS TEXT)", (os.fsencode(copy),))  # bytes: any home path
    except (sqlite3.Error, OSError) as exc:
        log.warning("the new index keeps its free pages: copying it without them failed (%s)", exc)
        delete(copy, ("", "-journal"))
        return False
    conn.close()
    os.replace(copy, path)
    return True


def sync(path: Path) -> None:
    """fsync a file built without syncs (`schema.connect`'s bulk mode) before it is renamed into use.

    Raises:
        OSError: when it cannot be opened or synced.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def seal(conn: sqlite3.Connection, path: Path) -> None:
    """Leave no page of an earlier index anywhere (`conn`: the only open connection to `path`): the file
    is vacuumed when it has free pages, checkpointed, and switched out of WAL and back (which deletes
    the -wal file), and leftovers of earlier files in its folder (a ``.new`` build, ``.damaged-*``
    copies moved aside) are removed.

    Raises:
        sqlite3.Error, OSError: when the file or its folder cannot be written.
    """
    if conn.execute("PRAGMA freelist_count").fetchone()[0]:
        conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("PRAGMA journal_mode=WAL")
    for entry in path.parent.iterdir():
        name = entry.name
        if name.startswith(f"{path.name}.new") or name.startswith(f"{path.name}.damaged-"):
            entry.unlink(missing_ok=True)
    fsio.fsync_dir(path.parent)
