"""Applying the `memory` tool's identity edits to a file's entries (M5a section 5, Rules; DESIGN 10.6).

Pure functions over values: each takes the file's entries as they are now and returns either an
`Outcome` (the new entries and what goes to notes.md, in order) or a `Refusal` with its fixed sentence.
Entries are named by their full text; every `old` must match an entry exactly, so an edit made against
an old view of the file fails safely (hermes #26045), and an empty `old` matches nothing (letta PR #1616).
"Exactly" is after NFC and trimming, the way new entries are stored (DESIGN 7): an `old` typed in NFD
names the entry stored in NFC, and an entry the owner wrote in NFD by hand is named by either form. No
other folding (no NFKC, no case folding), so `refused:not-found` and `refused:ambiguous` keep their
meaning; the duplicate test compares the same way.

Rule order for a new or rewritten entry: `empty`, `duplicate`, `limit` (on the whole file after the
edit), then the content rules of `rules.check_text` on the NFC text (DESIGN 10.6). A note's `length`
rule comes first of all, before any per-character scan.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from boxmaker.memoryd.check.rules import check_text
from boxmaker.memoryd.files.entries import NOTE_LIMIT, FileSpec, prepare, text_length
from boxmaker.memoryd.sentences import Refusal, identity

#: How an entry leaves an identity file for notes.md (its header word, M5a section 3).
Departure = Literal["moved", "dropped"]

# A raw note longer than this is refused before it is even normalised (NFC can shrink text, but
# never by a factor of ten).
_RAW_NOTE_CEILING = 10 * NOTE_LIMIT


@dataclass(frozen=True, slots=True)
class Outcome:
    """An applicable edit: the file's new entries and the entries leaving it, in the order given."""

    entries: tuple[str, ...]
    departures: tuple[tuple[Departure, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Item:
    """One `consolidate` item: `old` (None for a new entry) and what to do with it.

    `op` is "keep", "text" (rewrite `old` as `text`), "move", "drop", or "new" (only `text`).
    """

    op: Literal["keep", "text", "move", "drop", "new"]
    old: str | None = None
    text: str | None = None


@dataclass(frozen=True, slots=True)
class NoteText:
    """A note ready to append: its NFC, trimmed text."""

    text: str
    extra: dict[str, str] = field(default_factory=dict)


def vet_entry(text: str) -> Refusal | None:
    """The content rules for one prepared entry: `empty`, then rules 1-10 (DESIGN 10.6)."""
    if not text:
        return identity.EMPTY
    refusal = check_text(text)
    if refusal is not None:
        return Refusal(refusal.code, refusal.sentence)
    return None


def vet_note(raw: str) -> NoteText | Refusal:
    """A note's rules: `length` (1 to 1,000 characters), `empty`, then rules 1-10."""
    if len(raw) > _RAW_NOTE_CEILING:
        return identity.note_length(len(raw))
    text = prepare(raw)
    if len(raw) == 0 or len(text) > NOTE_LIMIT:
        return identity.note_length(len(text))
    refusal = vet_entry(text)
    return refusal if refusal is not None else NoteText(text)


def _fits(spec: FileSpec, entries: Sequence[str]) -> Refusal | None:
    size = text_length(entries)
    return identity.limit(spec.name, size, spec.limit) if size > spec.limit else None


def _held(entries: Sequence[str]) -> list[str]:
    """The entries as they are compared with an `old` or a new text: each one `prepare`d (NFC, trimmed)."""
    return [prepare(entry) for entry in entries]


def _find(spec: FileSpec, entries: Sequence[str], old: str) -> int | Refusal:
    wanted = prepare(old)
    if not wanted:
        return identity.empty_old(spec.name)
    matches = [i for i, entry in enumerate(_held(entries)) if entry == wanted]
    if not matches:
        return identity.not_found(spec.name)
    if len(matches) > 1:
        return identity.ambiguous(spec.name, len(matches))
    return matches[0]


def add(spec: FileSpec, entries: Sequence[str], raw: str) -> Outcome | Refusal:
    """Append a new entry: `empty`, `duplicate`, `limit`, then the content rules."""
    text = prepare(raw)
    if not text:
        return identity.EMPTY
    if text in _held(entries):
        return identity.duplicate(spec.name)
    new = (*entries, text)
    return _fits(spec, new) or vet_entry(text) or Outcome(new)


def replace(spec: FileSpec, entries: Sequence[str], old: str, raw: str) -> Outcome | Refusal:
    """Rewrite the one entry that is exactly `old` as `raw`."""
    where = _find(spec, entries, old)
    if isinstance(where, Refusal):
        return where
    text = prepare(raw)
    if not text:
        return identity.EMPTY
    if text in _held(entries):
        return identity.duplicate(spec.name)
    new = (*entries[:where], text, *entries[where + 1 :])
    return _fits(spec, new) or vet_entry(text) or Outcome(new)


def remove(spec: FileSpec, entries: Sequence[str], old: str) -> Outcome | Refusal:
    """Remove the one entry that is exactly `old`; it goes to notes.md as dropped."""
    where = _find(spec, entries, old)
    if isinstance(where, Refusal):
        return where
    new = (*entries[:where], *entries[where + 1 :])
    return _fits(spec, new) or Outcome(new, (("dropped", entries[where]),))


def consolidate(spec: FileSpec, entries: Sequence[str], items: Sequence[Item]) -> Outcome | Refusal:
    """Rewrite the whole file: every current entry named exactly once as an `old`.

    Kept and rewritten entries and new ones form the new file in the order given; moved and
    dropped entries go to notes.md in the order given.
    """
    keys = _held(entries)
    named = Counter(prepare(item.old) for item in items if item.old is not None)
    held = Counter(keys)
    if any(named[old] > held[old] for old in named):
        return identity.consolidate_twice(spec.name)
    missing = sum((held - named).values())
    if missing:
        return identity.consolidate_missing(spec.name, missing)
    # an `old` names the file's own entry: what is kept, moved or dropped is the file's text
    stored: dict[str, list[str]] = {}
    for key, entry in zip(keys, entries, strict=True):
        stored.setdefault(key, []).append(entry)
    new: list[str] = []
    departures: list[tuple[Departure, str]] = []
    for item in items:
        if item.op in ("move", "drop", "keep"):
            assert item.old is not None
            entry = stored[prepare(item.old)].pop(0)
            if item.op == "keep":
                new.append(entry)
            else:
                departures.append(("moved" if item.op == "move" else "dropped", entry))
        else:
            text = prepare(item.text or "")
            if not text:
                return identity.EMPTY
            new.append(text)
    if len(set(_held(new))) != len(new):
        return identity.duplicate(spec.name)
    refusal = _fits(spec, new)
    if refusal is not None:
        return refusal
    for text in new:
        refusal = vet_entry(text) if prepare(text) not in held else None
        if refusal is not None:
            return refusal
    return Outcome(tuple(new), tuple(departures))
