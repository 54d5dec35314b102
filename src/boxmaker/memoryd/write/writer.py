"""Where a `memory` write goes, and every path that changes a memory file (M5a section 5).

- `note` is appended to notes.md in any session, labelled by the session: ``noted as mem-…`` or
  ``noted as mem-… (untrusted)`` (the new item's id).
- In a session that has not seen untrusted content, `add`, `replace`, `remove` and `consolidate`
  apply to memory.md or user.md (or, with review on, wait in pending.jsonl for the owner).
- In a session that has, an `add` becomes an untrusted note and the answer says so; the other
  identity actions are refused with ``refused:tainted``.
- `accept`, `undo` and the owner's own writes pass the same rules (the limit on every path:
  letta #3241). Every applied change is journalled (`journal.Journal.commit`).
- Every note (the model's `note`, a tainted `add`, the owner's `bxctl memory note`) is a capture
  (seed 003 sections 9 and 12): the same commit appends its header ``… · <mem-id> · <kind>`` and text
  to notes.md and a capture event to ``items.jsonl`` (the journal line carries it under ``events``),
  with the id from `items.store.ItemStore.next_id` and the Source memoryd sets itself (`source`). Moved and
  dropped notes (consolidate) are not captures. A trusted `add` applied to memory.md or user.md
  records the capture fields it was given in its journal line only (``capture``).

All writes are serialised by one lock; each re-reads the file it changes inside the lock, so an
edit decided against an old view fails instead of clobbering a newer entry (hermes #26045).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from boxmaker.memoryd import sentences
from boxmaker.memoryd.files import source
from boxmaker.memoryd.files.edits import Outcome, vet_note
from boxmaker.memoryd.files.entries import (
    BY_NAME,
    CONVENTIONS,
    IDENTITY_FILES,
    FileSpec,
    file_content,
    text_length,
)
from boxmaker.memoryd.files.journal import Append, Change, Journal, Reserved, Rewrite, encode_line
from boxmaker.memoryd.files.names import ITEMS_FILE
from boxmaker.memoryd.files.notes import Note as NoteEntry
from boxmaker.memoryd.files.notes import count as count_notes
from boxmaker.memoryd.files.notes import header_time, render, render_header
from boxmaker.memoryd.files.store import IdentityFile, Store
from boxmaker.memoryd.items.live import ItemStore
from boxmaker.memoryd.items.store import Item, capture_event
from boxmaker.memoryd.sentences import OK, Refusal, identity
from boxmaker.memoryd.write import staged
from boxmaker.memoryd.write.actions import (
    Add,
    CaptureFields,
    MemoryAction,
    Note,
    capture_fields,
    decide,
    given,
)
from boxmaker.memoryd.write.answer import OWNER, PRIVATE, Answer, Caller
from boxmaker.memoryd.write.origin import identity_rule
from boxmaker.proto import fsio
from boxmaker.proto.labels import DataClass, Label

#: The files an undo may restore when named by its edit id: memory.md, user.md, and conventions.md (an
#: accepted proposal's rewrite, `proposals`). A bare undo takes the latest edit of memory.md or user.md.
UNDOABLE: dict[str, FileSpec] = {**BY_NAME, CONVENTIONS.name: CONVENTIONS}


#: A capture's plan (`Writer.note`): (fold, new id, time, edit id) → (label, events after, sentence).
Plan = Callable[[Mapping[str, Item], str, str, str], "tuple[Label, list[dict[str, Any]], str] | Refusal"]


class Writer:
    """Applies memory writes to the files under ``memory/``.

    Args:
        store: the files.
        journal: the edit journal (commits).
        now: the clock (aware UTC datetimes).
        review: stage identity writes from sessions for the owner instead of applying them.
        on_notes: called with the notes appended and the exact bytes appended (the index adds them).
        sessions: the home's ``sessions/`` folder, where a capture's Source is looked up (None: the
            Source names the session and call only).
        items: the home's one item store (a new one over ``store.dir`` when not given).
        lock: the write lock every change of memory/ holds (a new one when not given; autodream's dry
            run shares the daemon's).
    """

    def __init__(
        self,
        store: Store,
        journal: Journal,
        now: Callable[[], dt.datetime],
        review: bool,
        on_notes: Callable[[Sequence[NoteEntry], bytes], None],
        *,
        sessions: Path | None = None,
        items: ItemStore | None = None,
        lock: threading.Lock | None = None,
    ) -> None:
        self.store = store
        self.journal = journal
        self.now = now
        self.review = review
        self.on_notes = on_notes
        self.sessions = sessions
        self.items = items or ItemStore(store.dir)
        self.lock = lock or threading.Lock()
        self._notes = 0
        self._notes_seen: tuple[int, int] | None = None

    def open(self) -> None:
        """Complete an interrupted commit, then count the notes."""
        with self.lock:
            self.journal.open()
            self._count_notes()

    def _count_notes(self) -> None:
        """How many notes notes.md holds (their positions continue from there)."""
        counted = self.store.count_notes()
        self._notes = count_notes(self.store.read_notes()) if counted is None else counted
        self._notes_seen = _stat(self.store.notes_path)

    def _next_position(self) -> int:
        """The position of the next note; counted again when someone else changed notes.md."""
        if _stat(self.store.notes_path) != self._notes_seen:
            self._count_notes()
        return self._notes

    # The memory tool -------------------------------------------------------------------------

    def memory(self, caller: Caller, action: MemoryAction) -> Answer:
        """Route and apply one `memory` call by the identity-write rule (M5a section 5; `origin`)."""
        fields = capture_fields(action) if isinstance(action, (Note, Add)) else None
        if isinstance(fields, Refusal):
            return Answer.refused(fields)
        if isinstance(action, Note):
            return self.note(caller, action.text, "note", fields=fields)
        spec = IDENTITY_FILES[action.file]
        verdict = identity_rule(caller.origin)
        if not verdict.applies:
            if isinstance(action, Add):
                return self._hold(caller, action, spec, fields)
            return Answer.refused(verdict.refusal(spec.name, caller.origin))
        with self.lock:
            current = self.store.read_identity(spec)
            outcome = decide(spec, current.entries, action)
            if isinstance(outcome, Refusal):
                return Answer.refused(outcome)
            if self.review and not caller.owner:
                return staged.staged_answer(staged.stage(self, caller, action), spec)
            edit = self.commit_edit(
                caller,
                _action_name(action),
                current,
                outcome,
                given(action, fields),
                data_class=caller.label.data_class,
            )
        return Answer(identity.updated(spec.name, text_length(outcome.entries), spec.limit), OK, edit)

    def _hold(self, caller: Caller, action: Add, spec: FileSpec, fields: CaptureFields | None) -> Answer:
        """An `add` the identity-write rule holds back: kept as a note with the caller's label, and
        staged with its origin for the owner (`staged.accept`)."""
        noted = self.note(caller, action.text, "add", spec.name, fields=fields)
        if noted.ok:
            with self.lock:
                staged.stage(self, caller, action)
        return noted

    def note(
        self,
        caller: Caller,
        raw: str,
        action: str,
        file: str = "notes.md",
        *,
        fields: CaptureFields | None = None,
        plan: Plan | None = None,
        origin_ref: str | None = None,
        header: str = "",
    ) -> Answer:
        """Append a note labelled by the caller and capture it as an item (module docstring);
        `action` is "note", or "add" (with the identity `file` it was meant for) for an add from a
        tainted session; `fields` are its checked capture fields (None: knowledge, nothing else).
        `origin_ref` is the item's Source when memoryd knows a better one than the session's (an import:
        ``import:<source>``); `header` is one more field of the note's header (``via import:<source>``).

        `plan` (a merge, `itemops.merge`) is asked inside the lock with the fold and the new item's
        id and time: it refuses (nothing written), or gives the item's label, the events that follow
        its capture in the same commit and the answer's sentence."""
        vetted = vet_note(raw)
        if isinstance(vetted, Refusal):
            return Answer.refused(vetted)
        fields = fields or CaptureFields()
        if caller.via is not None:
            anchor: str | None = source.mcp_source(caller.via.client, caller.session, caller.call)
        else:
            anchor = (
                None if caller.owner else source.session_source(self.sessions, caller.session, caller.call)
            )
        with self.lock:
            reserved = self.journal.reserve()
            ident = self.items.next_id(reserved.moment.astimezone(dt.UTC).date())
            label, said = caller.label, ""
            after: list[dict[str, Any]] = []
            if plan is not None:
                decided = plan(self.items.latest().items, ident, reserved.time, reserved.id)
                if isinstance(decided, Refusal):
                    return Answer.refused(decided)
                label, after, said = decided
            entry = NoteEntry(
                "noted",
                header_time(reserved.moment),
                caller.session,
                "",
                label,
                vetted.text,
                self._next_position(),
                (ident, fields.kind, *((caller.via.field,) if caller.via is not None else ())),
            )
            if header:
                entry = dataclasses.replace(entry, extra=(*entry.extra, header))
            event = capture_event(
                ident=ident,
                time=reserved.time,
                kind=fields.kind,
                subject=fields.subject,
                scope=fields.scope,
                confidence=fields.confidence,
                text=vetted.text,
                label=label,
                source=origin_ref or anchor or source.owner_source(reserved.id),
                session=caller.session,
                call=caller.call,
                corroborating_refs=fields.corroborating_refs,
                inspired_by=fields.inspired_by,
                note=entry.key,
                edit=reserved.id,
            )
            line = self.journal.commit(
                Change(
                    {
                        **_who(caller),
                        "action": action,
                        "file": file,
                        "where": "notes.md",
                        "before": [],
                        "after": [vetted.text],
                        "notes": [{"header": render_header(entry), "text": entry.text}],
                        "events": [event, *after],
                    },
                    [
                        appended := self._notes_append([entry]),
                        Append(ITEMS_FILE, b"".join(encode_line(e) + b"\n" for e in [event, *after])),
                    ],
                    reserved=reserved,
                )
            )
            self._notes += 1
            self._notes_seen = _stat(self.store.notes_path)
            self.on_notes([entry], appended.data)
        if said:
            return Answer(said, sentences.OK, line["id"])
        if action == "add":
            return Answer(_held_sentence(caller, ident), sentences.NOTED, line["id"])
        return Answer(identity.noted(ident, caller.label.untrusted), sentences.NOTED, line["id"])

    # Review (`staged`) -------------------------------------------------------------------------

    def accept(self, pid: str, confirmed: bool = False) -> Answer:
        """Apply a staged write with the same checks, against the file as it is now (`staged.accept`)."""
        return staged.accept(self, pid, confirmed)

    def reject(self, pid: str) -> Answer:
        """Discard a staged write (journalled)."""
        return staged.reject(self, pid)

    # Undo ------------------------------------------------------------------------------------

    def undo(self, wanted: str | None) -> Answer:
        """Revert an edit if it is the latest of its file and the file still holds what it left
        (M5a's undo, kept as it is; `write.revert` takes back any edit, entry by entry).

        "Latest" skips edits already undone: undoing twice goes two edits back. The newest entry of
        a file may also be named, an undo included (which redoes what it undid).
        """
        with self.lock:
            target = self._undo_target(wanted)
            if isinstance(target, Answer):
                return target
            spec = UNDOABLE[target["where"]]
            current = self.store.read_identity(spec)
            if list(current.entries) != target["after"]:
                return Answer.refused(identity.changed_since(spec.name, target["id"]))
            restored = tuple(target["before"])
            if text_length(restored) > spec.limit:
                return Answer.refused(identity.limit(spec.name, text_length(restored), spec.limit))
            extra = {"undoes": target["id"]}
            edit = self.commit_edit(
                OWNER, "undo", current, Outcome(restored), extra, data_class=class_of(target)
            )
        return Answer(identity.undone(target["id"], edit, spec.name), OK, edit)

    def _undo_target(self, wanted: str | None) -> dict[str, Any] | Answer:
        if wanted is None:
            target = self._latest_in_effect(None)
            if target is None:
                return Answer.refused(identity.NOTHING_TO_UNDO)
            return target
        target = self.journal.find(wanted)
        if target is None:
            return Answer.refused(identity.no_edit(wanted))
        where = target.get("where")
        if target.get("action") == "repair":
            return Answer.refused(identity.repair_not_undoable(wanted))
        if where not in UNDOABLE:
            return Answer.refused(identity.not_undoable(wanted, str(where)))
        if not isinstance(target.get("before"), list) or not isinstance(target.get("after"), list):
            return Answer.refused(identity.journal_line_damaged(wanted))
        newest = self.journal.latest_for(where)
        in_effect = self._latest_in_effect(where)
        if wanted not in {(newest or {}).get("id"), (in_effect or {}).get("id")}:
            latest = (in_effect or newest or {}).get("id", "?")
            return Answer.refused(identity.not_latest(wanted, str(where), str(latest)))
        return target

    def _latest_in_effect(self, where: str | None) -> dict[str, Any] | None:
        """The newest edit of `where` (None: of memory.md or user.md) that is not an undo and has
        not been undone (an undo that was itself undone no longer counts), nor a repair (which put
        back the text an earlier edit left)."""
        undone: set[str] = set()
        for entry in self.journal.entries_newest_first():
            if entry.get("where") not in (BY_NAME if where is None else (where,)):
                continue
            if entry["id"] in undone or entry.get("action") == "repair":
                continue
            if entry.get("action") == "undo":
                undone.add(str(entry.get("undoes")))
                continue
            if isinstance(entry.get("before"), list) and isinstance(entry.get("after"), list):
                return entry
        return None

    # Commit ----------------------------------------------------------------------------------

    def commit_edit(
        self,
        caller: Caller,
        action: str,
        current: IdentityFile,
        outcome: Outcome,
        extra: dict[str, Any],
        *,
        data_class: DataClass,
        appends: Sequence[Append] = (),
        reserved: Reserved | None = None,
    ) -> str:
        """Journal and apply one identity edit (its moved and dropped entries appended to notes.md);
        the line carries the class of the text written (``class``, DESIGN 10.4 added); the edit id
        (`reserved`'s when given: a line whose appends name their own edit)."""
        spec = current.spec
        moment = header_time(self.now())
        first = self._next_position() if outcome.departures else self._notes
        departures = [
            NoteEntry(kind, moment, caller.session, spec.name, PRIVATE, text, first + i)
            for i, (kind, text) in enumerate(outcome.departures)
        ]
        entry = {
            **_who(caller),
            "action": action,
            "file": spec.name,
            "where": spec.name,
            "before": list(current.entries),
            "after": list(outcome.entries),
            "class": data_class.value,
            **extra,
        }
        steps = list(appends)
        if departures:
            entry["notes"] = [{"header": render_header(n), "text": n.text} for n in departures]
            steps.insert(0, self._notes_append(departures))
        rewrite = Rewrite(spec.name, current.raw, file_content(outcome.entries))
        line = self.journal.commit(Change(entry, steps, rewrite, reserved))
        if departures:
            self._notes += len(departures)
            self._notes_seen = _stat(self.store.notes_path)
            self.on_notes(departures, steps[0].data)
        return str(line["id"])

    def _notes_append(self, notes: Sequence[NoteEntry]) -> Append:
        """The bytes that append `notes` to notes.md, starting on a line of their own even when the
        owner left the file without a final newline (a header must open its line)."""
        data = "".join(render(n) for n in notes).encode("utf-8")
        if not fsio.ends_with_newline(self.store.notes_path):
            data = b"\n" + data
        return Append("notes.md", data)


def class_of(line: dict[str, Any]) -> DataClass:
    """The class a journal line records for its edit (lines from before the field: private); an undo
    carries the class of the edit it reverts, so a class is never lost by undoing (only stricter)."""
    try:
        return DataClass(line.get("class", "private"))
    except ValueError:
        return DataClass.SECRET


def _held_sentence(caller: Caller, ident: str) -> str:
    """What a held-back `add` answers: the seed's sentence for an untrusted session, else one naming
    the class or the origin."""
    origin = caller.origin
    reason = identity_rule(origin).reason
    if reason == "tainted":
        return identity.saved_as_note(ident)
    if reason == "class":
        return identity.saved_as_note_class(ident, origin.label.data_class.value)
    return identity.held_as_note(ident, origin.described)


def _action_name(action: MemoryAction) -> str:
    return type(action).__name__.lower()


def _who(caller: Caller) -> dict[str, Any]:
    who = {"session": caller.session, "call": caller.call, "untrusted": caller.label.untrusted}
    if caller.via is not None:
        who["mcp"] = caller.via.record()  # added (issue 17): the MCP client and its peer's uid and pid
    return who


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    return info.st_size, info.st_mtime_ns
