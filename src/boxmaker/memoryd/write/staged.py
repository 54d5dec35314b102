"""Staged identity writes and the owner's decisions on them (M5a section 5, Review; the
identity-write rule, `write.origin`).

A write is staged in pending.jsonl for one of two reasons: review is on and a trusted private session
made it (the seed's review), or the identity-write rule held it back (an ``add`` from an untrusted or
above-private session, an MCP client the owner has not trusted with identity, an import). Each
staged line carries its origin (``"origin": {"kind", "name", "class", "untrusted"}``, an added field;
lines from before it are read from ``session``, ``taint`` and ``untrusted``).

The owner's accept re-runs every check against the file as it is now. A change the rule held back is
then an owner edit: it needs ``confirmed`` (``bxctl memory accept --yes``) when its origin is untrusted
or above private, its answer names the origin, and its journal line is the owner's with ``origin``
and the edit's ``class``. A review-mode write keeps the seed's journal line (the session's).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import msgspec

from boxmaker.memoryd import sentences
from boxmaker.memoryd.files import pending
from boxmaker.memoryd.files.edits import Outcome
from boxmaker.memoryd.files.entries import IDENTITY_FILES, FileSpec, text_length
from boxmaker.memoryd.files.journal import Append, Change, Journal, encode_line
from boxmaker.memoryd.files.store import IdentityFile, Store
from boxmaker.memoryd.sentences import OK, Refusal, identity
from boxmaker.memoryd.write.actions import (
    Add,
    Consolidate,
    MemoryAction,
    Note,
    Remove,
    Replace,
    decide,
    given,
)
from boxmaker.memoryd.write.answer import OWNER, Answer, Caller
from boxmaker.memoryd.write.origin import Origin, identity_rule, needs_confirmation, origin_of
from boxmaker.proto import fsio
from boxmaker.proto.labels import DataClass, Label

IdentityAction = Add | Replace | Remove | Consolidate


class Writer(Protocol):
    """What staging needs of `write.writer.Writer`: the files, the journal, the lock, the clock, and
    its commit of an identity edit."""

    store: Store
    journal: Journal
    lock: threading.Lock
    now: Callable[[], dt.datetime]

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
    ) -> str:
        """Journal and apply one identity edit; returns its edit id."""
        ...


def stage(writer: Writer, caller: Caller, action: MemoryAction) -> str:
    """Append `action` by `caller` to pending.jsonl with its origin; returns the pending id."""
    path = writer.store.pending_path
    moment = writer.now()
    pid = pending.next_id(path, moment.date())
    event = {
        "event": "staged",
        "id": pid,
        "time": _stamp(moment),
        "session": caller.session,
        "call": caller.call,
        "untrusted": caller.label.untrusted,
        "taint": caller.label.data_class.value,
        "origin": caller.origin.record(),
        "arguments": msgspec.to_builtins(action),
    }
    fsio.append_line(path, encode_line(event))
    return pid


def staged_answer(pid: str, spec: FileSpec) -> Answer:
    """What a review-mode write answers once staged."""
    return Answer(identity.staged(pid, spec.name), sentences.STAGED)


def accept(writer: Writer, pid: str, confirmed: bool) -> Answer:
    """Apply staged write `pid` with the same checks, against the file as it is now (module docstring)."""
    with writer.lock:
        staged, state = pending.find(writer.store.pending_path, pid)
        if staged is None or state != "pending":
            return Answer.refused(identity.not_pending(pid, state))
        parsed = _parse(pid, staged)
        if isinstance(parsed, Answer):
            return parsed
        action, caller, origin = parsed
        held = not identity_rule(origin).applies
        if held and needs_confirmation(origin.label) and not confirmed:
            return Answer.refused(identity.confirm_needed(pid, origin.described))
        spec = IDENTITY_FILES[action.file]
        current = writer.store.read_identity(spec)
        outcome = decide(spec, current.entries, action)
        if isinstance(outcome, Refusal):
            return Answer(identity.not_applied(pid, outcome.sentence), outcome.code)
        extra: dict[str, Any] = {"pending": pid, **given(action, None)}
        if held:
            caller = OWNER
            extra["origin"] = origin.record()
        edit = writer.commit_edit(
            caller,
            type(action).__name__.lower(),
            current,
            outcome,
            extra,
            data_class=origin.label.data_class,
            appends=[_decision(writer, pid, "accepted")],
        )
    applied = identity.updated(spec.name, text_length(outcome.entries), spec.limit)
    if held:
        return Answer(identity.accepted_from(pid, edit, origin.described, applied), OK, edit)
    return Answer(identity.accepted(pid, edit, applied), OK, edit)


def reject(writer: Writer, pid: str) -> Answer:
    """Discard staged write `pid` (journalled as the owner's)."""
    with writer.lock:
        staged, state = pending.find(writer.store.pending_path, pid)
        if staged is None or state != "pending":
            return Answer.refused(identity.not_pending(pid, state))
        arguments = staged.get("arguments")
        key = arguments.get("file") if isinstance(arguments, dict) else None
        file = IDENTITY_FILES[key].name if key in IDENTITY_FILES else "memory.md"
        entry = {"session": OWNER.session, "call": "", "untrusted": False, "action": "reject"}
        entry.update({"file": file, "where": "pending.jsonl", "before": [], "after": [], "pending": pid})
        line = writer.journal.commit(Change(entry, [_decision(writer, pid, "rejected")]))
    return Answer(identity.rejected(pid, file), OK, line["id"])


def staged_origin(event: dict[str, Any]) -> Origin:
    """The origin of a staged line: its ``origin`` field, else (lines from before it) the session and
    its ``taint`` and ``untrusted``; an unreadable class counts as secret (never laxer)."""
    found = origin_of(event.get("origin"))
    if found is not None:
        return found
    try:
        data_class = DataClass(event.get("taint"))
    except ValueError:
        data_class = DataClass.SECRET
    label = Label(data_class, event.get("untrusted") is not False)
    return Origin("session", str(event.get("session", "?")), label)


def _parse(pid: str, staged: dict[str, Any]) -> tuple[IdentityAction, Caller, Origin] | Answer:
    """The identity action, the caller and the origin of a staged line, or why it is unusable."""
    try:
        action: MemoryAction = msgspec.convert(staged["arguments"], MemoryAction)
        origin = staged_origin(staged)
        caller = Caller(str(staged["session"]), str(staged["call"]), origin.label)
    except (KeyError, ValueError, msgspec.ValidationError) as exc:
        return Answer.refused(identity.staged_damaged(pid, str(exc)))
    if isinstance(action, Note):
        return Answer.refused(identity.staged_note(pid))
    return action, caller, origin


def _decision(writer: Writer, pid: str, event: str) -> Append:
    line = {"event": event, "id": pid, "time": _stamp(writer.now())}
    return Append("pending.jsonl", encode_line(line) + b"\n")


def _stamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
