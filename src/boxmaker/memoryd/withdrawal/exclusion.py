"""What is excluded from influence right now: the union of every excluded scope (seed 003 section 12.2).

`from_chains` expands the resolved chains (`records.resolve`) over the items and notes into one
immutable `Exclusion` that recall, the owner's search, the memory block, the indexer, tiers, the
projections and export apply before they expose anything; `withdrawn_by` names the control events that
keep each item out, and `withdrawn_entries` the identity entries that leave the block.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from boxmaker.memoryd.files.notes import Note
from boxmaker.memoryd.items.store import Item, item_id_of
from boxmaker.memoryd.withdrawal.records import Chain, parse_anchor

#: Journal actions that put back what an earlier edit wrote rather than writing (undo, revert, repair).
_PUTS_BACK = frozenset({"undo", "revert", "repair"})

#: A recall hit's key for a session record: ``session/<id>/<epoch>/<line 0-based>[/<part>]``.
_RECORD_KEY = re.compile(r"^session/([a-z0-9][a-z0-9-]{0,63})/([0-9]+)/([0-9]+)(?:/[0-9]+)?\Z")


class Keyed(Protocol):
    """What `Exclusion.hit` reads of a recall hit (`index.hits.Hit`): its session, kind and key."""

    @property
    def session(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def key(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Exclusion:
    """Everything excluded from influence right now (the union of every excluded scope).

    Built by `Controls.exclusion`; immutable, safe to share between threads.

    Attributes:
        items: withdrawn item ids (named directly, through an archive ref, or captured by a
            withdrawn session or record).
        sessions: withdrawn session ids (every record and note of theirs).
        records: withdrawn session-log records as (session, epoch, line 1-based).
        archives: withdrawn archive refs as given (a whole day's file, or ``file#id``).
        note_keys: the stable keys (``note/<position>/<time>``) of withdrawn notes.
        texts: the text of every withdrawn item (an identity entry equal to one leaves the block).
    """

    items: frozenset[str] = frozenset()
    sessions: frozenset[str] = frozenset()
    records: frozenset[tuple[str, int, int]] = frozenset()
    archives: frozenset[str] = frozenset()
    note_keys: frozenset[str] = frozenset()
    texts: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.items or self.sessions or self.records or self.archives)

    def item(self, item: Item) -> bool:
        """True when `item` is withdrawn (by id, archive ref, session or source record)."""
        if item.id in self.items or item.session in self.sessions:
            return True
        if item.archive_ref is not None and self.archive(item.archive_ref):
            return True
        anchor = parse_anchor(item.captured_from)
        return anchor is not None and self.record(*anchor)

    def session(self, session_id: str) -> bool:
        """True when every record and note of `session_id` is withdrawn."""
        return session_id in self.sessions

    def record(self, session: str, epoch: int, line: int) -> bool:
        """True when line `line` (1-based) of ``sessions/<session>/<epoch>.jsonl`` is withdrawn."""
        return session in self.sessions or (session, epoch, line) in self.records

    def archive(self, ref: str) -> bool:
        """True when an archive ref (``archive/D.md`` or ``archive/D.md#mem-…``) is withdrawn: the
        whole file, that item's anchor, or the item itself."""
        file, _, ident = ref.partition("#")
        return ref in self.archives or file in self.archives or (bool(ident) and ident in self.items)

    def note(self, note: Note) -> bool:
        """True when a notes.md entry is withdrawn: its item (the id in its header, or its stable
        key recorded by the capture) or its session."""
        if note.session in self.sessions or note.key in self.note_keys:
            return True
        ident = item_id_of(note)
        return ident is not None and ident in self.items

    def hit(self, hit: Keyed) -> bool:
        """True when a recall hit is withdrawn: a note by key or session, a turn or summary by its
        session or its record."""
        if hit.session in self.sessions:
            return True
        if hit.kind == "note":
            return hit.key in self.note_keys
        match = _RECORD_KEY.match(hit.key)
        if match is None:
            return False
        return self.record(match.group(1), int(match.group(2)), int(match.group(3)) + 1)


def from_chains(chains: Iterable[Chain], items: Mapping[str, Item], notes: Sequence[Note]) -> Exclusion:
    """The exclusion of every excluded chain, expanded over `items` and `notes`."""
    ids: set[str] = set()
    sessions: set[str] = set()
    records: set[tuple[str, int, int]] = set()
    archives: set[str] = set()
    for chain in chains:
        if not chain.excluded:
            continue
        ids.update(chain.scope.memory_item_ids)
        archives.update(chain.scope.archive_refs)
        for ref in chain.scope.source_or_run_refs:
            anchor = parse_anchor(ref)
            if anchor is None:
                sessions.add(ref)
            else:
                records.add(anchor)
    base = Exclusion(frozenset(ids), frozenset(sessions), frozenset(records), frozenset(archives))
    withdrawn = {i.id: i for i in items.values() if base.item(i)}
    ids.update(withdrawn)
    keys = {i.note for i in withdrawn.values() if i.note}
    texts = {i.text for i in withdrawn.values() if i.text and not i.erased}
    full = Exclusion(frozenset(ids), frozenset(sessions), frozenset(records), frozenset(archives))
    for note in notes:
        if full.note(note):
            keys.add(note.key)
            if note.text:
                texts.add(note.text)
    return Exclusion(
        full.items, full.sessions, full.records, full.archives, frozenset(keys), frozenset(texts)
    )


def withdrawn_by(
    chains: Iterable[Chain], items: Mapping[str, Item], notes: Sequence[Note]
) -> dict[str, list[str]]:
    """For each withdrawn item, the ids of the control events that keep it excluded: each excluded
    scope's controlling event (its heads, when conflicting) whose scope selects the item."""
    found: dict[str, list[str]] = {}
    for chain in chains:
        if not chain.excluded:
            continue
        heads = [h.withdrawal_id for h in chain.heads] or [r.withdrawal_id for r in chain.records[-1:]]
        for ident in sorted(from_chains([chain], items, notes).items):
            if ident in items:
                found.setdefault(ident, [])
                found[ident] += [h for h in heads if h not in found[ident]]
    return found


def withdrawn_entries(
    exclusion: Exclusion, files: dict[str, Sequence[str]], journal: Iterator[dict[str, Any]]
) -> set[tuple[str, str]]:
    """The identity entries (file, text) that leave every exposure: those whose exact text equals a
    withdrawn item's text, and those the journal shows a withdrawn session wrote (the newest edit
    that brought the text into the file was that session's; an undo, a revert and a repair put back
    what an earlier edit wrote, so the search passes over them).

    Args:
        exclusion: what is withdrawn.
        files: each identity file's entries as they are now, by file name.
        journal: journal lines, newest first (read only when a session is withdrawn).
    """
    found = {(name, text) for name, entries in files.items() for text in entries if text in exclusion.texts}
    if not exclusion.sessions:
        return found
    open_ = {(name, text) for name, entries in files.items() for text in entries} - found
    for line in journal:
        if not open_:
            break
        where, before, after = line.get("where"), line.get("before"), line.get("after")
        if not (isinstance(before, list) and isinstance(after, list)) or line.get("action") in _PUTS_BACK:
            continue
        for name, text in list(open_):
            if where == name and text in after and text not in before:
                open_.discard((name, text))
                if str(line.get("session")) in exclusion.sessions:
                    found.add((name, text))
    return found
