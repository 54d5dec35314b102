"""notes.md parsed once and followed as it grows (issue 16): the owner's listings (`tiers`, `review`) and
erasure's scope read every note per request, and parsing 100,000 notes costs about a second.

`NotesView.notes` compares the file's identity (device, inode, size, mtime) with what it parsed last:

- the same: the parsed notes are current;
- the same file, longer, the bytes before the old end unchanged (a guard of `GUARD_BYTES`), the old
  end a newline and the new bytes starting with a header line: only the new bytes are parsed (memoryd
  appends whole entries, `notes.render`), their positions following the old ones;
- anything else (another inode, shorter, rewritten, an append that does not start with a header, a BOM
  or CRLF at the seam): the whole file is parsed again, exactly as `notes.parse(store.read_notes())`.

So what it returns is always `notes.parse` of the file as it is on disk, never ahead or behind it.
Thread-safe.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from boxmaker.memoryd.files.entries import normalise_newlines
from boxmaker.memoryd.files.notes import HEADER, Note, parse
from boxmaker.proto import fsio

#: How many bytes before the parsed end must be unchanged for an append to be parsed alone.
GUARD_BYTES = 64

Identity = tuple[int, int, int, int]


class NotesView:
    """notes.md parsed and followed (module docstring).

    Args:
        path: notes.md.
        read_all: the file's whole text as `Store.read_notes` gives it (BOM dropped, CRLF as LF),
            raising `FileUnreadable` for a missing or undecodable file.

    Attributes:
        parses: how many times the whole file was parsed.
    """

    def __init__(self, path: Path, read_all: Callable[[], str]) -> None:
        self.path = path
        self._read_all = read_all
        self._mutex = threading.Lock()
        self._notes: tuple[Note, ...] = ()
        self._seen: Identity | None = None
        self._guard = b""
        self.parses = 0

    def notes(self) -> Sequence[Note]:
        """Every notes.md entry in file order (`notes.parse` of the file now); do not modify it.

        Raises:
            FileUnreadable: notes.md is missing, unreadable or not UTF-8.
        """
        with self._mutex:
            try:
                identity = _identity(self.path)
            except OSError:
                identity = None
            if identity is not None and identity == self._seen:
                return self._notes
            if identity is None or not self._follow(identity):
                self._parse_all()
            return self._notes

    def _follow(self, identity: Identity) -> bool:
        """Parse only what was appended since the last read; False when that cannot be done."""
        seen = self._seen
        if seen is None or identity[:2] != seen[:2] or identity[2] <= seen[2] or not self._guard:
            return False
        start = seen[2] - len(self._guard)
        try:
            fd = fsio.open_nofollow(self.path, os.O_RDONLY)
        except OSError:
            return False
        try:
            now = _of(os.fstat(fd))
            if now[:2] != seen[:2] or now[2] <= seen[2]:
                return False
            data = os.pread(fd, now[2] - start, start)
        finally:
            os.close(fd)
        if len(data) != now[2] - start or not data.startswith(self._guard) or not self._guard.endswith(b"\n"):
            return False
        added = data[len(self._guard) :]
        try:
            text = added.decode("utf-8")
        except UnicodeDecodeError:
            return False
        if "\r" in text or "\ufeff" in text:
            return False
        if HEADER.match(text.split("\n", 1)[0]) is None:
            return False
        count = len(self._notes)
        fresh = [_moved(note, count) for note in parse(text)]
        self._notes = (*self._notes, *fresh)
        self._seen = now
        self._guard = data[-GUARD_BYTES:]
        return True

    def _parse_all(self) -> None:
        try:
            before = _identity(self.path)
        except OSError:
            before = None
        text = self._read_all()  # raises FileUnreadable as the plain read does
        try:
            after = _identity(self.path)
        except OSError:
            after = None
        self._notes = tuple(parse(normalise_newlines(text)))
        self.parses += 1
        raw = text.encode("utf-8")
        if before is not None and before == after and len(raw) == before[2]:
            self._seen, self._guard = before, raw[-GUARD_BYTES:]
        else:  # changing while read, or not as on disk (a BOM): parse again next time
            self._seen, self._guard = None, b""


def _moved(note: Note, count: int) -> Note:
    return replace(note, position=note.position + count)


def _of(info: os.stat_result) -> Identity:
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def _identity(path: Path) -> Identity:
    return _of(os.stat(path, follow_symlinks=False))
