"""notes.md: append-only experience, each entry under a header saying how it got there.

M5a section 3 (`notes.md`) and DESIGN 10.4. Headers::

    § noted 2026-09-24T21:02Z in session chat-... · private · untrusted
    § moved 2026-09-24T20:14Z from memory.md in session chat-...
    § dropped 2026-09-24T20:14Z from memory.md in session chat-...

A `noted` entry carries its session's class and ``· untrusted`` when the session had read untrusted
content; `moved` and `dropped` entries were identity, so they are private and trusted. Fields added
later follow after `` · ``. No entry body can contain a header line (the check's `separator` rule), so
headers cannot be forged. Text before the first header is the owner's, typed by hand: trusted, private.

Pure functions; the file itself is written by `store`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from boxmaker.proto.labels import DataClass, Label

NoteKind = Literal["noted", "moved", "dropped"]

_SESSION = r"[a-z0-9][a-z0-9-]{0,63}"
_TIME = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}Z"
HEADER = re.compile(
    rf"^§ (?:(?P<noted>noted) (?P<ntime>{_TIME}) in session (?P<nsession>{_SESSION})"
    rf"|(?P<kind>moved|dropped) (?P<time>{_TIME}) from (?P<file>memory\.md|user\.md) "
    rf"in session (?P<session>{_SESSION}))(?P<rest>(?: · [^\n]*)?)\Z"
)
_CLASSES = {c.value for c in DataClass}


@dataclass(frozen=True, slots=True)
class Note:
    """One notes.md entry.

    Attributes:
        kind: noted, moved or dropped.
        time: the header's time (``YYYY-MM-DDTHH:MMZ``), "" for text typed before any header.
        session: the full session id, or "owner".
        source: for moved and dropped, the identity file it left; "" otherwise.
        label: the entry's label.
        text: the body.
        position: its place in notes.md, from 0 (stable: the file is append-only).
        extra: header fields after the label, in order (fields later work adds).
    """

    kind: NoteKind
    time: str
    session: str
    source: str
    label: Label
    text: str
    position: int = 0
    extra: tuple[str, ...] = field(default=())

    @property
    def key(self) -> str:
        """The stable source key recall logs name this note by (DESIGN 10.4)."""
        return f"note/{self.position}/{self.time}"


def header_time(moment: dt.datetime) -> str:
    """A header's time: UTC to the minute, ``2026-09-24T21:02Z``."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%MZ")


def render_header(note: Note) -> str:
    """The header line of `note` (no newline)."""
    if note.kind == "noted":
        parts = [f"§ noted {note.time} in session {note.session}", note.label.data_class.value]
        if note.label.untrusted:
            parts.append("untrusted")
    else:
        parts = [f"§ {note.kind} {note.time} from {note.source} in session {note.session}"]
    parts.extend(note.extra)
    return " · ".join(parts)


def render(note: Note) -> str:
    """The text appended to notes.md for `note`: header, body, and a blank line."""
    return f"{render_header(note)}\n{note.text}\n\n"


def parse(text: str) -> list[Note]:
    """All entries of notes.md in file order, with their positions.

    Text before the first header becomes one owner note (trusted, private, no time).
    """
    notes: list[Note] = []
    for position, (head, body) in enumerate(_split(text)):
        notes.append(_note(head, body, position))
    return notes


_CANDIDATE = re.compile("^§ ", re.MULTILINE)


def count(text: str) -> int:
    """``len(parse(text))`` without making the notes (memoryd counts notes.md at start)."""
    found, first = 0, len(text)
    for start in header_starts(text):
        found += 1
        first = min(first, start)
    return found + (1 if text[:first].strip() else 0)


def header_starts(text: str) -> Iterator[int]:
    """Where each header line of `text` starts, in order (only lines starting ``§ `` are matched)."""
    for candidate in _CANDIDATE.finditer(text):
        start = candidate.start()
        end = text.find("\n", start)
        if HEADER.match(text[start : end if end >= 0 else len(text)]) is not None:
            yield start


def is_header(line: str) -> bool:
    """True for a notes.md header line (``§ noted …``, ``§ moved …``, ``§ dropped …``)."""
    return HEADER.match(line) is not None


def _split(text: str) -> Iterator[tuple[re.Match[str] | None, str]]:
    """(header, body) of each entry: the lines that are headers (only a line starting ``§ `` can be one,
    so only those are matched), each body the stripped text between one header and the next."""
    head: re.Match[str] | None = None
    body_start = 0
    for candidate in _CANDIDATE.finditer(text):
        start = candidate.start()
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        match = HEADER.match(text[start:end])
        if match is None:
            continue
        body = text[body_start : max(body_start, start - 1)].strip()
        if head is not None or body:
            yield head, body
        head, body_start = match, end + 1
    body = text[body_start:].strip()
    if head is not None or body:
        yield head, body


#: Every label a header can give, made once (`_note`).
_LABELS = {(c.value, u): Label(c, u) for c in DataClass for u in (False, True)}
_PRIVATE = _LABELS[(DataClass.PRIVATE.value, False)]


def _note(head: re.Match[str] | None, body: str, position: int) -> Note:
    if head is None:
        return Note("noted", "", "owner", "", _PRIVATE, body, position)
    fields = [f for f in head.group("rest").split(" · ") if f]
    if head.group("noted"):
        data_class = fields.pop(0) if fields and fields[0] in _CLASSES else DataClass.PRIVATE.value
        untrusted = bool(fields) and fields[0] == "untrusted"
        if untrusted:
            fields.pop(0)
        label = _LABELS[(data_class, untrusted)]
        return Note(
            "noted", head.group("ntime"), head.group("nsession"), "", label, body, position, tuple(fields)
        )
    kind: NoteKind = "moved" if head.group("kind") == "moved" else "dropped"
    return Note(
        kind,
        head.group("time"),
        head.group("session"),
        head.group("file"),
        _PRIVATE,
        body,
        position,
        tuple(fields),
    )
