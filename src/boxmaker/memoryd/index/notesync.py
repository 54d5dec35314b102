"""notes.md as the index sees it (M5a section 6): the file read whole or in pieces with the (size,
mtime) it was read at, and bringing an index's notes in line with it (appended notes added; any other
change indexes every note again)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path
from typing import Any

from boxmaker.memoryd.files.entries import normalise_newlines
from boxmaker.memoryd.files.notes import is_header
from boxmaker.memoryd.files.notes import parse as parse_notes
from boxmaker.memoryd.index.db import IndexDB

#: A file's (size, mtime in ns), or None when it is missing.
Stat = tuple[int, int] | None


def snapshot(path: Path) -> tuple[bytes, Stat]:
    """A file's bytes and the (size, mtime) they were read at; nothing for a missing file."""
    try:
        with path.open("rb") as handle:
            info = os.fstat(handle.fileno())
            return handle.read(), (info.st_size, info.st_mtime_ns)
    except FileNotFoundError:
        return b"", None


def read_notes(path: Path, known: int) -> tuple[Any, Any, bytes, int, Stat] | None:
    """notes.md read in pieces: the sha256 of its first `known` bytes and of all of it, the bytes
    after `known`, its size and the (size, mtime) it was read at; None when it is missing."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return None
    with handle:
        info = os.fstat(handle.fileno())
        head, whole, tail, offset = hashlib.sha256(), hashlib.sha256(), [], 0
        while offset < info.st_size:
            chunk = handle.read(min(1 << 20, info.st_size - offset))
            if not chunk:
                break
            whole.update(chunk)
            head.update(chunk[: max(0, known - offset)])
            if offset + len(chunk) > known:
                tail.append(chunk[max(0, known - offset) :])
            offset += len(chunk)
    return head, whole, b"".join(tail), offset, (info.st_size, info.st_mtime_ns)


def stat_of(path: Path) -> Stat:
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    return info.st_size, info.st_mtime_ns


def sync_index_notes(db: IndexDB, data: bytes) -> bool:
    """Bring `db`'s notes in line with notes.md's `data`, in one transaction. Returns True when
    notes.md had only grown by appending since `db` last saw it (the new notes were added), False
    when it had changed otherwise (every note was indexed again). Only the appended bytes are parsed
    when they start with a note's header, so a start costs the same at any size."""
    known = int(db.meta("notes_bytes") or 0)
    count = int(db.meta("notes_count") or 0)
    meta = {"notes_sha256": hashlib.sha256(data).hexdigest(), "notes_bytes": str(len(data))}
    grown = known <= len(data) and hashlib.sha256(data[:known]).hexdigest() == (
        db.meta("notes_sha256") or hashlib.sha256().hexdigest()
    )
    tail = normalise_newlines(data[known:].decode("utf-8", errors="replace")) if grown else ""
    if grown and (not tail.strip() or is_header(tail.lstrip("\n").split("\n", 1)[0])):
        added = [dataclasses.replace(note, position=note.position + count) for note in parse_notes(tail)]
        db.add_notes(added, meta)
        return True
    notes = parse_notes(normalise_newlines(data.decode("utf-8", errors="replace")))
    if grown and len(notes) >= count:
        db.add_notes(notes[count:], meta)
        return True
    db.replace_notes(notes, meta)
    return False


def add_appended(db: IndexDB, path: Path) -> tuple[Any, int, Stat] | None:
    """Add to `db` the notes appended to notes.md (`path`) since the index last saw it, reading the
    file in pieces (a start in a home of 100,000 notes never holds it whole). Returns the sha256 of the
    whole file, its size and the (size, mtime) it was read at; None, with nothing done, when notes.md is
    missing or was changed otherwise than by appending notes (the caller then reads it whole).

    Raises:
        sqlite3.Error: the index cannot take the notes.
    """
    known = int(db.meta("notes_bytes") or 0)
    read = read_notes(path, known)
    if read is None:
        return None
    head, whole, tail, size, stat = read
    text = normalise_newlines(tail.decode("utf-8", errors="replace"))
    empty = hashlib.sha256().hexdigest()
    if size < known or head.hexdigest() != (db.meta("notes_sha256") or empty):
        return None
    if text.strip() and not is_header(text.lstrip("\n").split("\n", 1)[0]):
        return None
    count = int(db.meta("notes_count") or 0)
    added = [dataclasses.replace(note, position=note.position + count) for note in parse_notes(text)]
    db.add_notes(added, {"notes_sha256": whole.hexdigest(), "notes_bytes": str(size)})
    return whole, size, stat
