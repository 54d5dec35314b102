"""memoryd's files under ``{home}/memory/`` (M5a section 3; DESIGN 2 and 7).

| file | written by | limit |
|---|---|---|
| soul.md | the owner (starts as a copy of the starter) | 4,000 characters |
| conventions.md | the owner (by hand, or `bxctl memory proposals accept`) | 2,000 characters |
| memory.md, user.md | memoryd, applying the agent's writes | 2,200 and 1,375 characters |
| proposals.jsonl | memoryd, appending (the `memory` action propose; the owner's decisions) | none |
| notes.md | memoryd, appending | none |
| edits/YYYY-MM.jsonl, recalls/YYYY-MM.jsonl, pending.jsonl | memoryd, appending | none |

soul.md and conventions.md together are at most 4,000 characters (`STEERING_LIMIT`, the owner's
steering budget; `steering_problem`). At start memoryd creates what is missing (folder 0700, files
0600) and never overwrites anything.
Files the owner edits by hand are read with a leading BOM dropped and CRLF as LF.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from boxmaker.memoryd.files.entries import (
    CONVENTIONS,
    SOUL_LIMIT,
    STEERING_LIMIT,
    FileSpec,
    normalise_newlines,
    parse_entries,
    text_length,
)
from boxmaker.memoryd.files.notes import Note, header_starts
from boxmaker.memoryd.files.notesview import NotesView
from boxmaker.proto import fsio
from boxmaker.proto.errors import BoxmakerError


class FileUnreadable(BoxmakerError):
    """Raised when a memory file cannot be read or is not UTF-8."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path.name} is unreadable: {why}")
        self.path = path


class FileOverLimit(BoxmakerError):
    """Raised when a file the owner edited by hand is over its limit (the block is then refused)."""

    def __init__(self, name: str, size: int, limit: int) -> None:
        if name == STEERING:
            text = f"{name} are {size:,} of {limit:,} characters; shorten one of them by hand"
        else:
            owners = ("soul.md", CONVENTIONS.name)
            how = "by hand" if name in owners else "by hand, or by moving entries to notes with consolidate"
            text = f"{name} is {size:,} of {limit:,} characters; shorten it {how}"
        super().__init__(text)
        self.name = name


#: How the shared limit of soul.md and conventions.md is named in its sentence.
STEERING = "soul.md and conventions.md together"


def steering_problem(soul: str, conventions: IdentityFile) -> FileOverLimit | None:
    """conventions.md over its 2,000 characters, or soul.md (trimmed) and conventions.md together over
    `STEERING_LIMIT`; None when both fit (soul.md's own 4,000 is `Store.read_soul`'s)."""
    if conventions.size > CONVENTIONS.limit:
        return FileOverLimit(CONVENTIONS.name, conventions.size, CONVENTIONS.limit)
    if len(soul) + conventions.size > STEERING_LIMIT:
        return FileOverLimit(STEERING, len(soul) + conventions.size, STEERING_LIMIT)
    return None


@dataclass(frozen=True, slots=True)
class IdentityFile:
    """An identity file as read: its raw text (for the journal), entries and counted size."""

    spec: FileSpec
    raw: str
    entries: tuple[str, ...]

    @property
    def size(self) -> int:
        """The counted length of the file's text, in characters."""
        return text_length(self.entries)


class Store:
    """Reads and creates the memory files. Writes go through `journal.Journal.commit`."""

    def __init__(self, memory_dir: Path, soul_starter: Path) -> None:
        self.dir = memory_dir
        self.soul_starter = soul_starter
        self._notes = NotesView(self.notes_path, self.read_notes)

    @property
    def soul_path(self) -> Path:
        """soul.md."""
        return self.dir / "soul.md"

    @property
    def notes_path(self) -> Path:
        """notes.md."""
        return self.dir / "notes.md"

    @property
    def pending_path(self) -> Path:
        """pending.jsonl (review)."""
        return self.dir / "pending.jsonl"

    def path(self, spec: FileSpec) -> Path:
        """The path of an identity file."""
        return self.dir / spec.name

    def ensure(self) -> list[str]:
        """Create the folder and every missing file; never overwrite; remove the temp files of
        writes a crash interrupted (their content is in the journal or never took effect). Returns
        the names created.

        Raises:
            OSError: when the folder or a file cannot be created.
            FileUnreadable: when soul.md is missing and the starter cannot be read.
        """
        fsio.ensure_dir(self.dir)
        fsio.ensure_dir(self.dir / "edits")
        fsio.ensure_dir(self.dir / "recalls")
        for leftover in self.dir.glob(".*.tmp-*"):  # a whole-file write a crash interrupted
            leftover.unlink(missing_ok=True)
        created = []
        if not self.soul_path.exists():
            try:
                starter = self.soul_starter.read_bytes()
            except OSError as exc:
                raise FileUnreadable(self.soul_starter, exc.strerror or str(exc)) from None
            if fsio.ensure_file(self.soul_path, starter):
                created.append("soul.md")
        for name in (CONVENTIONS.name, "memory.md", "user.md", "notes.md"):
            if fsio.ensure_file(self.dir / name):
                created.append(name)
        return created

    def read_text(self, path: Path) -> str:
        """A file's raw text (UTF-8, as on disk).

        Raises:
            FileUnreadable: when it cannot be read or is not UTF-8.
        """
        try:
            data = fsio.read_bytes(path)
        except FileNotFoundError:
            raise FileUnreadable(
                path, "it is missing; restore it, or restart memoryd to create it empty"
            ) from None
        except OSError as exc:
            raise FileUnreadable(path, exc.strerror or str(exc)) from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FileUnreadable(path, f"not UTF-8 at byte {exc.start:,}") from None

    def count_notes(self) -> int | None:
        """`notes.count` of notes.md read line by line (100,000 notes are never held whole), or None
        when the file needs `read_notes`'s care (a BOM, a carriage return, bytes that are not UTF-8) or
        is missing.

        Raises:
            OSError: when it cannot be read.
        """
        found, before, carry, first = 0, False, b"", True
        try:
            handle = self.notes_path.open("rb")
        except FileNotFoundError:
            return None
        with handle:
            while True:  # a megabyte of whole lines at a time (a line never splits a UTF-8 character)
                chunk = handle.read(1 << 20)
                data = carry + chunk
                cut = len(data) if not chunk else data.rfind(b"\n") + 1
                block, carry = data[:cut], data[cut:]
                if b"\r" in block or (first and block.startswith(b"\xef\xbb\xbf")):
                    return None
                first = first and not block
                try:
                    text = block.decode("utf-8")
                except UnicodeDecodeError:
                    return None
                for start in header_starts(text):
                    if not found and text[:start].strip():
                        before = True
                    found += 1
                if not found and text.strip():
                    before = True
                if not chunk:
                    break
        return found + (1 if before else 0)

    def read_identity(self, spec: FileSpec) -> IdentityFile:
        """memory.md or user.md with its entries.

        Raises:
            FileUnreadable: see `read_text`.
        """
        raw = self.read_text(self.path(spec))
        return IdentityFile(spec, raw, tuple(parse_entries(normalise_newlines(raw))))

    def read_conventions(self) -> IdentityFile:
        """conventions.md with its entries (the limits are `steering_problem`'s).

        Raises:
            FileUnreadable: see `read_text`.
        """
        return self.read_identity(CONVENTIONS)

    @property
    def proposals_path(self) -> Path:
        """proposals.jsonl (`proposals`)."""
        return self.dir / "proposals.jsonl"

    def read_soul(self) -> str:
        """soul.md's text, trimmed.

        Raises:
            FileUnreadable: see `read_text`.
            FileOverLimit: over 4,000 characters.
        """
        text = normalise_newlines(self.read_text(self.soul_path)).strip()
        if len(text) > SOUL_LIMIT:
            raise FileOverLimit("soul.md", len(text), SOUL_LIMIT)
        return text

    def parsed_notes(self) -> Sequence[Note]:
        """notes.md's entries as `notes.parse(read_notes())` gives them, parsed once and followed as the
        file grows (`notesview.NotesView`); do not modify the result.

        Raises:
            FileUnreadable: see `read_text`.
        """
        return self._notes.notes()

    def legacy_or_marked_notes(self, markers: Sequence[str]) -> Sequence[Note]:
        """The notes.md entries review reads (`notesview.legacy_or_marked`: legacy notes, and notes
        holding one of `markers`), found without parsing every note and kept until the file changes;
        do not modify the result.

        Raises:
            FileUnreadable: see `read_text`.
        """
        return self._notes.legacy_or_marked(markers)

    def read_notes(self) -> str:
        """notes.md's text (BOM dropped, CRLF as LF).

        Raises:
            FileUnreadable: see `read_text`.
        """
        return normalise_newlines(self.read_text(self.notes_path))
