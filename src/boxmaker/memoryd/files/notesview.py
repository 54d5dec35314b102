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
Thread-safe. A whole parse is `parse_all` (the same notes, header lines found by one pattern).

`NotesView.legacy_or_marked` is what review reads: only the legacy notes (no item id) and the notes
holding a legacy marker, found by one scan of the text (`legacy_or_marked`) and kept, a few notes, until
the file changes; the notes memoryd writes are never made into objects for it.
"""

from __future__ import annotations

import bisect
import codecs
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import AnyStr

from boxmaker.memoryd.files.entries import normalise_newlines
from boxmaker.memoryd.files.notes import _SESSION, _TIME, HEADER, Note, _note, parse
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
        self._picked: tuple[Identity, tuple[str, ...], list[Note]] | None = None

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

    def legacy_or_marked(self, markers: Sequence[str]) -> Sequence[Note]:
        """`legacy_or_marked` of the file now (what review reads of notes.md), kept until the file
        changes (device, inode, size or mtime): a few notes, never the whole parse. Do not modify it.

        Raises:
            FileUnreadable: notes.md is missing, unreadable or not UTF-8.
        """
        wanted = tuple(markers)
        with self._mutex:
            try:
                before = _identity(self.path)
            except OSError:
                before = None
            kept = self._picked
            if before is not None and kept is not None and kept[:2] == (before, wanted):
                return kept[2]
            try:
                raw: bytes | None = fsio.read_bytes(self.path)
            except OSError:
                raw = None
            if raw is None or raw.startswith(codecs.BOM_UTF8) or b"\r" in raw or not _is_utf8(raw):
                found = legacy_or_marked(self._read_all(), wanted)  # raises FileUnreadable as the plain read
            else:  # notes.md as read_all gives it: scanned as bytes, never decoded whole
                found = legacy_or_marked(raw, wanted)
            try:
                after = _identity(self.path)
            except OSError:
                after = None
            self._picked = (before, wanted, found) if before is not None and before == after else None
            return found

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
        try:
            raw: bytes | None = fsio.read_bytes(self.path)
        except OSError:
            raw = None
        if raw is None or raw.startswith(codecs.BOM_UTF8) or b"\r" in raw or not _is_utf8(raw):
            text = self._read_all()  # raises FileUnreadable as the plain read does
            notes = parse_all(normalise_newlines(text))
            raw = text.encode("utf-8")
        else:  # notes.md as read_all gives it: decoded a piece at a time, never whole
            notes = parse_bytes(raw)
        try:
            after = _identity(self.path)
        except OSError:
            after = None
        self._notes = tuple(notes)
        self.parses += 1
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


#: A date `datetime.date.fromisoformat` accepts in ``YYYY-MM-DD`` (year 1 to 9999, the month's days,
#: 29 February in leap years only).
_VALID_DATE = (
    r"(?:(?!0000)[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    r"|02-(?:0[1-9]|1[0-9]|2[0-8]))"
    r"|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)"
)
#: A header field that cannot hold the separator `` · `` (no space, no ``·``): when every field is one,
#: the fields `notes` splits are exactly these.
_PLAIN = r"[^ ·\n]+"
#: A noted header line unless its fields are all plain and the first starting ``mem-`` is an item id
#: (``mem-YYYY-MM-DD-NNN``, a real date: `items.store.is_item_id`), as memoryd writes every capture's
#: header: legacy notes (no item id) match, with the few odd headers that are checked one by one.
_NOTED_SUSPECT = (
    rf"§ noted {_TIME} in session {_SESSION}(?![a-z0-9-])"
    rf"(?!(?: · (?!mem-){_PLAIN})*+ · mem-{_VALID_DATE}-[0-9]{{3,}}(?: · {_PLAIN})*+$)"
)
#: `notes.HEADER` without its anchors: a whole line that is a header.
_HEADER_LINE = HEADER.pattern.removeprefix("^").removesuffix(r"\Z") + "$"
assert "^" + _HEADER_LINE[:-1] + r"\Z" == HEADER.pattern
#: `_PLAIN` over UTF-8 bytes: bytes other than a space, a newline and C2 (the lead byte of ``·``, C2 B7,
#: and of a few other characters, which are let through), taken whole (a field ends at a space).
_PLAIN_BYTES = rb"(?:[^ \n\xc2]|\xc2[^\xb7])[^ \n\xc2]*+(?:\xc2[^\xb7][^ \n\xc2]*+)*+"
_NOTED_SUSPECT_BYTES = _NOTED_SUSPECT.replace(_PLAIN, "\0").encode("utf-8").replace(b"\0", _PLAIN_BYTES)
#: Each pattern after a newline (a literal start, which `re` finds fast) and at the text's start.
_SUSPECTS = (
    re.compile(b"\n" + _NOTED_SUSPECT_BYTES, re.MULTILINE),
    re.compile(_NOTED_SUSPECT_BYTES, re.MULTILINE),
)
_HEADERS = (re.compile("\n" + _HEADER_LINE, re.MULTILINE), re.compile(_HEADER_LINE, re.MULTILINE))
_HEADERS_BYTES = (
    re.compile(b"\n" + _HEADER_LINE.encode("utf-8"), re.MULTILINE),
    re.compile(_HEADER_LINE.encode("utf-8"), re.MULTILINE),
)


def legacy_or_marked(text: str | bytes, markers: Sequence[str]) -> list[Note]:
    """The notes of `notes.parse(text)` that are ``noted`` without an item id in their header (legacy
    notes, and the text before the first header) or whose text holds one of `markers`, in file order with
    their positions, without making the other notes: review reads only these, and 100,000 notes with
    item ids then cost a scan of the text, not 100,000 `Note` objects. Each is given once.

    `text` may be given as UTF-8 bytes (valid, no BOM, no carriage return: what `notes.parse` reads is
    then their decoding), which are scanned as they are, so the notes are never decoded whole.
    Some notes given may be neither (a header of unusual fields: the caller checks each again, as
    `item_id_of` and ``marker in note.text``); none that is either is left out. `markers` hold no newline.
    """
    data = text.encode("utf-8") if isinstance(text, str) else text
    suspects = {found + 1 for found in _starts(_SUSPECTS[0], data)}
    if _SUSPECTS[1].match(data) is not None:
        suspects.add(0)
    wanted = {marker.encode("utf-8") for marker in markers if marker}
    marked = sorted({found for marker in wanted for found in _occurrences(data, marker)})
    headers = ((start, end) for start, end, _ in _header_lines(_HEADERS_BYTES, data))
    first = next(headers, None)
    preamble = (data[: max(0, first[0] - 1)] if first is not None else data).decode("utf-8").strip()
    found = [_note(None, preamble, 0)] if preamble else []
    if first is None or (not suspects and not marked):
        return found
    at = bisect.bisect_left(marked, first[0])
    position = len(found)
    head: tuple[int, int] | None = first
    while head is not None:
        following = next(headers, None)
        start, end = head
        body_start = end + 1
        entry_end = following[0] if following is not None else len(data)
        body_end = entry_end - 1 if following is not None else len(data)
        keep = start in suspects
        while at < len(marked) and marked[at] < entry_end:  # a marker's start: in the body, or the header
            keep = keep or body_start <= marked[at] < body_end
            at += 1
        if keep:
            line = HEADER.match(data[start:end].decode("utf-8"))
            assert line is not None  # the line `_HEADERS_BYTES` matched
            body = data[body_start : max(body_start, body_end)].decode("utf-8").strip()
            found.append(_note(line, body, position))
        position += 1
        head = following
    return found


def parse_all(text: str, first: int = 0) -> list[Note]:
    """`notes.parse` (every note, in file order), its header lines found by one pattern over the whole
    text instead of matched line by line: the same notes, about twice as fast on 100,000 notes. The
    positions start at `first` (a text that is the rest of a file, cut where a header line starts)."""
    found: list[Note] = []
    head: re.Match[str] | None = None
    body_start = 0
    for start, end, match in _header_lines(_HEADERS, text):
        body = text[body_start : max(body_start, start - 1)].strip()
        if head is not None or body:
            found.append(_note(head, body, first + len(found)))
        head, body_start = match, end + 1
    body = text[body_start:].strip()
    if head is not None or body:
        found.append(_note(head, body, first + len(found)))
    return found


def parse_bytes(data: bytes, piece: int = 1 << 20) -> list[Note]:
    """`parse_all` of `data`, UTF-8 without a BOM or a carriage return, decoded about `piece` bytes at a
    time, each piece ending where a header line starts (so its last body ends as in the whole text, and
    the next piece holds no text before a header): the same notes, and 100,000 notes are never held
    decoded whole (23 MB of notes.md is 92 MB as one str when a single character needs four bytes)."""
    found: list[Note] = []
    start = 0
    while start < len(data):
        following = _HEADERS_BYTES[0].search(data, start + piece) if start + piece < len(data) else None
        end = following.start() + 1 if following is not None else len(data)
        found += parse_all(data[start:end].decode("utf-8"), len(found))
        start = end
    return found


def _header_lines(
    patterns: tuple[re.Pattern[AnyStr], re.Pattern[AnyStr]], text: AnyStr
) -> Iterator[tuple[int, int, re.Match[AnyStr]]]:
    """Where each header line starts and ends (its newline, or the text's end), in order, with its
    match (the groups of `notes.HEADER`): `patterns` are `_HEADERS` or `_HEADERS_BYTES`."""
    at_start = patterns[1].match(text)
    if at_start is not None:
        yield 0, at_start.end(), at_start
    for match in patterns[0].finditer(text):
        yield match.start() + 1, match.end(), match


def _starts(pattern: re.Pattern[bytes], data: bytes) -> Iterator[int]:
    for match in pattern.finditer(data):
        yield match.start()


def _occurrences(data: bytes, needle: bytes) -> Iterator[int]:
    """Where `needle` starts in `data` (overlapping too)."""
    found = data.find(needle)
    while found >= 0:
        yield found
        found = data.find(needle, found + 1)


def _is_utf8(data: bytes) -> bool:
    """True when `data` decodes as UTF-8 (strictly, as `Store.read_text` reads), decoded a megabyte at a
    time so the whole text is never held decoded."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    try:
        for start in range(0, len(data), 1 << 20):
            decoder.decode(view[start : start + (1 << 20)])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True
