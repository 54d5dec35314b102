"""What an erasure covers in memoryd's files, and what it refuses before anything changes (seed 003
section 12.3; `run` has the whole picture): the scope (items and sessions), every text of it found in
the item store, notes.md, the journal and pending.jsonl, and the sessions an earlier erasure already
erased or that nothing holds.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from boxmaker.memoryd.files.checkpoint import Checkpoints
from boxmaker.memoryd.files.journal import Journal, read_jsonl
from boxmaker.memoryd.files.names import ERASURES_FILE
from boxmaker.memoryd.files.store import Store
from boxmaker.memoryd.index.index import Index
from boxmaker.memoryd.items.live import ItemStore
from boxmaker.memoryd.items.store import is_item_id, item_id_of
from boxmaker.memoryd.sentences import Refusal, identity
from boxmaker.memoryd.sentences import erasure as erasure_sentences
from boxmaker.proto import fsio
from boxmaker.proto.archives import archive_path, is_import_id
from boxmaker.proto.erasure import COMPLETED
from boxmaker.proto.home import Layout
from boxmaker.proto.ids import OWNER_SESSION, is_session_id

log = logging.getLogger("boxmaker.memoryd.erase")

#: The erasure ids `plan` handed out for an erasure about to run (``reserve``), for the process's life.
Reservations: TypeAlias = set[str]


@dataclass(frozen=True, slots=True)
class Holdings:
    """What an erasure reaches in memoryd (seed 003 section 12.3): the home's layout (memory/,
    sessions/, index/), the memory files and journal, the write lock, the index it rebuilds, the
    reserved erasure ids and the clock; and the checkpoints, which mark the erasure in progress while
    it scrubs files in place (None: nothing is marked)."""

    layout: Layout
    store: Store
    journal: Journal
    lock: AbstractContextManager[Any]
    index: Index
    reserved: Reservations
    now: Callable[[], dt.datetime]
    checkpoints: Checkpoints | None = None


@dataclass(frozen=True, slots=True)
class Scope:
    """What the owner named: item ids and session ids (validated)."""

    items: tuple[str, ...]
    sessions: tuple[str, ...]

    @property
    def anchors(self) -> tuple[str, ...]:
        """Prefixes of references into the erased sessions."""
        return tuple(
            prefix for s in self.sessions for prefix in (f"sessions/{s}/", f"sessions/{s}#", f"session/{s}/")
        )


@dataclass(slots=True)
class Covered:
    """What a scope covers in memoryd: the items it erases and the texts to remove."""

    items: list[str] = field(default_factory=list)
    texts: set[str] = field(default_factory=set)
    replacements: set[str] = field(default_factory=set)  # dependent records that get source-erased refs
    note_keys: set[str] = field(default_factory=set)  # recall keys of the notes erased whole


def parse_scope(args: dict[str, Any]) -> Scope | Refusal:
    """The scope from an admin request's args ``{"items": [...], "sessions": [...]}``."""
    items, sessions = args.get("items", []), args.get("sessions", [])
    if not isinstance(items, list) or not all(isinstance(i, str) and is_item_id(i) for i in items):
        return identity.arguments("items must be a list of item ids mem-YYYY-MM-DD-NNN")
    if not isinstance(sessions, list) or not all(
        isinstance(s, str) and is_session_id(s) and s != OWNER_SESSION for s in sessions
    ):
        return identity.arguments("sessions must be a list of session ids")
    if not items and not sessions:
        return erasure_sentences.ERASE_NO_SCOPE
    return Scope(tuple(dict.fromkeys(items)), tuple(dict.fromkeys(sessions)))


def texts_arg(args: dict[str, Any]) -> list[str] | Refusal:
    texts = args.get("texts", [])
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return identity.arguments("texts must be a list of strings")
    return texts


def covered(holdings: Holdings, scope: Scope) -> Covered | Refusal:
    """The items and texts `scope` covers in memoryd's files (see the module docstring)."""
    memory_dir = holdings.layout.memory
    store = ItemStore(memory_dir)
    items = store.items()
    for wanted in scope.items:
        if wanted not in items:
            return erasure_sentences.erase_unknown_item(wanted)
        if items[wanted].erased:  # its text is gone: a new run could not search for its copies
            return already_erased(memory_dir, "item", wanted)
    found = Covered()
    sessions = set(scope.sessions)
    chosen = [i for i in items.values() if i.id in scope.items or i.session in sessions]
    found.items = [i.id for i in chosen]
    found.texts.update(i.text for i in chosen if i.text)
    note_keys = {i.note for i in chosen if i.note}
    anchors = scope.anchors
    for item in items.values():
        refs = (item.captured_from, *item.corroborating_refs, item.inspired_by or "")
        if anchors and any(r.startswith(anchors) for r in refs if r):
            found.replacements.add(item.id)
        if item.id in found.items and item.archive_ref:
            found.replacements.add(item.archive_ref)
    try:
        notes = holdings.store.parsed_notes()
    except Exception as exc:  # an unreadable notes.md: its texts cannot be known
        log.error("erasure: notes.md cannot be read: %s", exc)
        notes = []
    for note in notes:
        if note.session in sessions or item_id_of(note) in found.items or note.key in note_keys:
            found.texts.add(note.text)
            found.note_keys.add(note.key)
    for entry in holdings.journal.entries_newest_first():
        if entry.get("session") not in sessions:
            continue
        before, after = entry.get("before"), entry.get("after")
        if isinstance(after, list):
            kept = before if isinstance(before, list) else []
            found.texts.update(str(t) for t in after if t not in kept)
        for note in entry.get("notes") or []:
            if isinstance(note, dict) and isinstance(note.get("text"), str):
                found.texts.add(note["text"])
    for event in read_jsonl(holdings.store.pending_path, ("event",)):
        if event.get("session") in sessions and isinstance(event.get("arguments"), dict):
            _strings(event["arguments"], found.texts, skip={"action", "file"})
    for session in sessions:
        found.texts |= archive_texts(holdings.layout.imports, session)
    found.texts = {t.strip() for t in found.texts if t.strip() and not is_marker(t.strip())}
    for note in notes:  # a note whose whole body is an erased text is erased whole too
        if note.text.strip() in found.texts:
            found.note_keys.add(note.key)
    return found


def already_erased(memory_dir: Path, what: str, ref: str) -> Refusal:
    """The refusal for a scope ref an earlier erasure erased, naming that erasure's open holders."""
    erased_by = [t for t in tombstones(memory_dir) if ref in (t.get("scope_refs") or [])]
    if not erased_by:
        return erasure_sentences.erase_already_erased(what, ref, "an earlier erasure", [])
    last = erased_by[-1]
    open_holders = [
        f"{h.get('holder_ref')} ({h.get('result')}"
        + (f", {h.get('limitation_ref')})" if h.get("limitation_ref") else ")")
        for h in last.get("holders") or []
        if isinstance(h, dict) and h.get("result") != COMPLETED
    ]
    return erasure_sentences.erase_already_erased(what, ref, str(last.get("erasure_id")), open_holders)


def archive_texts(imports: Path, session: str) -> set[str]:
    """The texts of an import archive (issue 17), as loopd gives those of a session: the owner's
    messages and the replies (unreadable lines skipped; none for a session that is not an import)."""
    if not is_import_id(session):
        return set()
    try:
        lines, _ = fsio.complete_lines(fsio.read_bytes(archive_path(imports, session)))
    except OSError:
        return set()
    found: set[str] = set()
    for raw in lines:
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        text = record.get("content") if isinstance(record, dict) else None
        if isinstance(text, str) and text.strip() and record.get("type") in ("user", "assistant"):
            found.add(text.strip())
    return found


def exists(holdings: Holdings, session: str) -> bool:
    """True when the session's log folder, or its import archive, is on disk."""
    if (holdings.layout.sessions / session).exists():
        return True
    return is_import_id(session) and archive_path(holdings.layout.imports, session).exists()


def _holds_session(holdings: Holdings, session: str) -> bool:
    """True when memoryd (or sessions/, which it indexes) holds anything of `session`: its folder or
    import archive, an item, a note, a journal line, a staged write or a recall line."""
    if exists(holdings, session):
        return True
    memory_dir = holdings.layout.memory
    if any(i.session == session for i in ItemStore(memory_dir).items().values()):
        return True
    try:
        if any(n.session == session for n in holdings.store.parsed_notes()):
            return True
    except Exception:  # an unreadable notes.md: count it as holding (fail towards erasing)
        return True
    if any(e.get("session") == session for e in holdings.journal.entries_newest_first()):
        return True
    if any(e.get("session") == session for e in read_jsonl(holdings.store.pending_path, ("event",))):
        return True
    return any(
        r.get("session") == session
        for path in sorted((memory_dir / "recalls").glob("*.jsonl"))
        for r in read_jsonl(path, ("session",))
    )


def check_sessions(
    holdings: Holdings, scope: Scope, held: list[str] | None, extra: Iterable[str] = ()
) -> Refusal | None:
    """Refuse a scope session that an earlier erasure erased and whose texts are no longer known (its
    folder is gone, loopd passed no text of it in `extra`, memoryd holds none), and, when `held` (the
    sessions loopd and brokerd say they hold) is given, a session nothing holds at all (it never
    existed: no tombstone for it)."""
    passed = {t.strip() for t in extra if t.strip()}
    for session in scope.sessions:
        erased_before = any(
            session in (t.get("scope_refs") or []) for t in tombstones(holdings.layout.memory)
        )
        if erased_before and not exists(holdings, session):
            alone = covered(holdings, Scope((), (session,)))
            # a text that holds a marker is an already scrubbed copy: searching for it finds nothing new
            found = alone.texts | passed if not isinstance(alone, Refusal) else {""}
            known = {t for t in found if "[erased" not in t}
            if not known:
                return already_erased(holdings.layout.memory, "session", session)
        if held is not None and session not in held and not _holds_session(holdings, session):
            return erasure_sentences.erase_nothing_held(session)
    return None


def held_arg(args: dict[str, Any]) -> list[str] | Refusal | None:
    held = args.get("held")
    if held is None:
        return None
    if not isinstance(held, list) or not all(isinstance(h, str) for h in held):
        return identity.arguments("held must be a list of session ids")
    return held


def is_marker(text: str) -> bool:
    return text == "[erased]" or (text.startswith("[erased memerase-") and text.endswith("]"))


def _strings(value: Any, into: set[str], skip: Iterable[str] = ()) -> None:
    if isinstance(value, str):
        into.add(value)
    elif isinstance(value, list):
        for v in value:
            _strings(v, into)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k not in skip:
                _strings(v, into)


def tombstones(memory_dir: Path) -> list[dict[str, Any]]:
    """Every tombstone in erasures.jsonl, oldest first."""
    return read_jsonl(memory_dir / ERASURES_FILE, ("erasure_id", "record_type"))
