"""Entries of memory.md and user.md (M5a section 3, Entries; DESIGN 7 and 10.4).

A file is a list of entries separated by a line whose stripped text is ``§``. An entry is trimmed,
not empty, and may span lines. Files are split on ``"\\n"`` only (never `str.splitlines`, which also
breaks on VT, FS, U+2028 and others). A file's text is its entries joined by ``"\\n§\\n"``; it is written
with one final newline that is not counted. Characters are counted as ``len()`` of the text.

Pure functions; no I/O.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

SEPARATOR = "§"
JOINER = "\n§\n"

SOUL_LIMIT = 4_000
NOTE_LIMIT = 1_000


@dataclass(frozen=True, slots=True)
class FileSpec:
    """An identity file the `memory` tool edits: its tool name, file name and limit in characters."""

    key: str
    name: str
    limit: int


MEMORY = FileSpec("memory", "memory.md", 2_200)
#: The owner's stable rules (seed 003 sections 5, 8 and 17; DESIGN 8 and 11): written only by the owner,
#: by hand or by accepting a proposal (`proposals`); never by a session or by autodream, so it is not an
#: `IDENTITY_FILES` key (no `memory` tool action names it).
CONVENTIONS = FileSpec("conventions", "conventions.md", 2_000)
#: soul.md and conventions.md together, the owner's steering budget (docs/decisions.md): with every file
#: at its limit the baseline stays within 3,000 tokens.
STEERING_LIMIT = 3_400
USER = FileSpec("user", "user.md", 1_375)
IDENTITY_FILES: dict[str, FileSpec] = {MEMORY.key: MEMORY, USER.key: USER}
BY_NAME: dict[str, FileSpec] = {MEMORY.name: MEMORY, USER.name: USER}


def normalise_newlines(raw: str) -> str:
    """How files the owner edits by hand are read: a leading BOM dropped, CRLF read as LF (DESIGN 7)."""
    if raw.startswith("\ufeff"):
        raw = raw[1:]
    return raw.replace("\r\n", "\n") if "\r" in raw else raw  # a lone character is found fast


def is_separator(line: str) -> bool:
    """True for a line whose stripped text is exactly ``§``."""
    return line.strip() == SEPARATOR


def parse_entries(text: str) -> list[str]:
    """Split a file's text into its entries: trimmed, never empty, in file order."""
    entries: list[str] = []
    current: list[str] = []
    for line in text.split("\n"):
        if is_separator(line):
            _close(current, entries)
            current = []
        else:
            current.append(line)
    _close(current, entries)
    return entries


def _close(lines: list[str], entries: list[str]) -> None:
    entry = "\n".join(lines).strip()
    if entry:
        entries.append(entry)


def render_entries(entries: Iterable[str]) -> str:
    """A file's text: the entries joined by ``"\\n§\\n"`` (no final newline; that is not counted)."""
    return JOINER.join(entries)


def text_length(entries: Sequence[str]) -> int:
    """The counted length of a file holding `entries`, in characters."""
    return len(render_entries(entries))


def file_content(entries: Sequence[str]) -> str:
    """What is written to disk: the text plus one final newline, or nothing for no entries."""
    return render_entries(entries) + "\n" if entries else ""


def prepare(text: str) -> str:
    """A new entry as it is checked and stored: NFC-normalised, then trimmed (DESIGN 7)."""
    return unicodedata.normalize("NFC", text).strip()
