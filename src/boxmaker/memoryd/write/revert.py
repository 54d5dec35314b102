"""Revert any journalled edit of memory.md, user.md or conventions.md (issue 19; ``bxctl memory revert``).

`undo` (`writer.Writer.undo`, M5a's contract) takes back only the latest edit of a file while the
file holds exactly what it left. `revert` takes back any edit whose *entries* are still as it left them
(`files.revert.plan`: the check is per entry, so later edits of other entries do not block it):

- refused with nothing written: ``refused:not-found`` (no such edit), ``refused:not-undoable`` (an edit
  of another file, a repair, or one whose revert changes nothing), ``refused:damaged`` (its line lacks
  ``before``/``after``), ``refused:erased`` (it wrote or took out text an erasure erased: the marker
  ``[erased memerase-…]`` stands in its line), ``refused:conflict`` naming the first later edit that
  changed one of its entries (revert that first, or edit by hand; or, when that edit is a revert or an
  undo of this one, saying it was already taken back), ``refused:changed`` (an entry it
  wrote was taken out by hand), ``refused:duplicate`` (an entry it took out is back, typed by hand),
  ``refused:withdrawn`` (an entry it would put back is withdrawn: its text is a withdrawn item's, or a
  withdrawn session wrote it), the write check's codes and ``refused:limit`` (what comes back passes
  every rule; conventions.md also soul.md's and its budget together), ``refused:confirm`` (what comes
  back was written from an untrusted or above-private origin: the owner's ``--yes``, as for `accept`);
- the entries the edit moved to notes.md stay there (append-only); an entry's origin is the newest
  edit before the reverted one that brought it into the file, undos, reverts and repairs passed over
  (they put back, they do not write); one typed by hand before any journal line is the owner's;
- applied as the owner's edit, journalled with action ``revert``, ``reverts`` (the id of the edit it
  reverts) and ``class`` (the strictest of the reverted edit's and of what comes back); itself
  revertable. Reverting an accepted proposal's rule in conventions.md (or reverting that revert) is
  also the owner's review decision: the same commit appends ``{"event": "decision", "status":
  "reverted"}`` (``"accepted"`` again) to proposals.jsonl and carries it under ``proposals`` with
  ``proposal``, so replay rebuilds it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from boxmaker.memoryd.files.edits import Outcome, vet_entry
from boxmaker.memoryd.files.entries import CONVENTIONS, STEERING_LIMIT, FileSpec, prepare, text_length
from boxmaker.memoryd.files.journal import Append, Reserved, encode_line
from boxmaker.memoryd.files.names import PROPOSALS_FILE
from boxmaker.memoryd.files.revert import Blocked, Restore, changes, erased_in, plan, touched
from boxmaker.memoryd.files.store import STEERING, FileOverLimit, FileUnreadable
from boxmaker.memoryd.sentences import OK, Refusal, identity
from boxmaker.memoryd.sentences import revert as said
from boxmaker.memoryd.write.answer import OWNER, PRIVATE, Answer
from boxmaker.memoryd.write.origin import Origin, OriginKind, needs_confirmation, origin_of
from boxmaker.memoryd.write.writer import UNDOABLE, Writer, class_of
from boxmaker.proto.ids import OWNER_SESSION
from boxmaker.proto.labels import Label

#: Whether an entry that would come back is withdrawn: (file name, the entry's text, the sessions that
#: wrote it: the line's session and its origin's name). Built by the admin front door from the controls.
Withdrawn = Callable[[str, str, Sequence[str]], bool]

#: Journal actions that put back what an earlier edit left instead of writing (passed over when the
#: origin of an entry is looked for).
_PUTS_BACK = frozenset({"undo", "revert", "repair"})


@dataclass(frozen=True, slots=True)
class Ready:
    """A revert that passed every check but the owner's confirmation: the edit's line, its file, the
    entries after it, and the origins of what comes back (empty unless asked for)."""

    target: dict[str, Any]
    spec: FileSpec
    restore: Restore
    origins: tuple[Origin, ...]


def target_of(line: dict[str, Any]) -> FileSpec | Refusal:
    """The file whose edit `line` records, or why it is not one revert takes back."""
    ident, where = str(line.get("id")), line.get("where")
    if line.get("action") == "repair":
        return said.repair_not_revertable(ident)
    if where not in UNDOABLE:
        return said.not_revertable(ident, str(where))
    if not isinstance(line.get("before"), list) or not isinstance(line.get("after"), list):
        return said.line_damaged(ident)
    return UNDOABLE[str(where)]


def check(
    lines: Sequence[dict[str, Any]],
    at: int,
    current: Sequence[str],
    soul: str | None,
    withdrawn: Withdrawn | None,
    *,
    full: bool = True,
) -> Ready | Refusal:
    """Whether ``lines[at]`` (`lines` newest first: the whole journal) can be reverted against its file's
    `current` entries (module docstring); `soul` is soul.md's text for an edit of conventions.md.
    With `full` false (``bxctl memory log``'s ``revertable``), the later edit of a conflict is not
    named and the origins are looked up only when something is withdrawn."""
    target = lines[at]
    spec = target_of(target)
    if isinstance(spec, Refusal):
        return spec
    edit, file = str(target["id"]), spec.name
    before = [str(e) for e in target["before"]]
    after = [str(e) for e in target["after"]]
    moved = touched(before, after)
    now = {prepare(e) for e in current}
    erasure = erased_in(moved.removed)
    if erasure is None:
        erasure = erased_in(e for e in moved.added if prepare(e) not in now)
    if erasure is None:  # erased entries share one marker, so a set difference may not see them go
        erasure = erased_in(
            ((Counter(before) - Counter(after)) + (Counter(after) - Counter(before))).elements()
        )
    if erasure is not None:
        return said.erased(edit, erasure)
    outcome = plan(before, after, current)
    if isinstance(outcome, Blocked):
        if outcome.kind == "nothing":
            return said.nothing_to_revert(edit, file)
        later = _later_change(lines[:at], file, prepare(outcome.entry)) if full else None
        if later is not None and edit in (later.get("reverts"), later.get("undoes")):
            return said.already_reverted(edit, str(later.get("id")))
        if later is not None:
            return said.conflict(edit, str(later.get("id")), file)
        return (
            said.changed_by_hand(edit, file)
            if outcome.kind == "gone"
            else said.restored_duplicate(edit, file)
        )
    origins: list[Origin] = []
    if full or withdrawn is not None:
        for entry in outcome.restored:
            origin, writers = _origin(islice(lines, at + 1, None), file, entry)
            if withdrawn is not None and withdrawn(file, entry, writers):
                return said.withdrawn(edit, file)
            origins.append(origin)
    refusal = _rules(spec, outcome, soul)
    if refusal is not None:
        return said.not_reverted(edit, refusal.code, refusal.sentence)
    return Ready(target, spec, outcome, tuple(origins))


def _rules(spec: FileSpec, outcome: Restore, soul: str | None) -> Refusal | None:
    """The write check on each entry that comes back, then the file's limit (and for conventions.md
    the steering budget with soul.md)."""
    for entry in outcome.restored:
        refusal = vet_entry(prepare(entry))
        if refusal is not None:
            return refusal
    size = text_length(outcome.entries)
    if size > spec.limit:
        if spec is CONVENTIONS:
            return said.revert_over_limit(spec.name, size, spec.limit)
        return identity.limit(spec.name, size, spec.limit)
    if spec is CONVENTIONS and soul is not None and len(soul) + size > STEERING_LIMIT:
        return said.revert_over_limit(STEERING, len(soul) + size, STEERING_LIMIT)
    return None


def _later_change(newer: Sequence[dict[str, Any]], file: str, key: str) -> dict[str, Any] | None:
    """The first edit of `file` after the reverted one (`newer`: newest first) that took out or put in
    the entry `key`; None when no journalled edit did (a hand edit)."""
    line: dict[str, Any]
    for line in reversed(newer):
        before, after = line.get("before"), line.get("after")
        if line.get("where") != file or line.get("action") == "repair":
            continue
        if (
            isinstance(before, list)
            and isinstance(after, list)
            and changes([str(e) for e in before], [str(e) for e in after], key)
        ):
            return line
    return None


def _origin(older: Iterable[dict[str, Any]], file: str, entry: str) -> tuple[Origin, tuple[str, ...]]:
    """Where `entry` of `file` came from (module docstring), and the sessions that wrote it (the line's
    session and its origin's name: a withdrawn one withdraws the entry)."""
    key = prepare(entry)
    for line in older:
        before, after = line.get("before"), line.get("after")
        if line.get("where") != file or line.get("action") in _PUTS_BACK:
            continue
        if not (isinstance(before, list) and isinstance(after, list)):
            continue
        if key in {prepare(str(e)) for e in after} and key not in {prepare(str(e)) for e in before}:
            session = str(line.get("session", ""))
            found = origin_of(line.get("origin"))
            if found is None:
                kind: OriginKind = "owner" if session == OWNER_SESSION else "session"
                found = Origin(kind, session, Label(class_of(line), line.get("untrusted") is True))
            return found, tuple(dict.fromkeys((session, found.name)))
    return Origin("owner", OWNER_SESSION, PRIVATE), ()


def revert(
    writer: Writer, wanted: str, *, confirmed: bool = False, withdrawn: Withdrawn | None = None
) -> Answer:
    """Revert edit `wanted` (module docstring); `confirmed` is the owner's ``--yes``.

    Raises:
        FileUnreadable: the file cannot be read (`answer.guarded` answers ``refused:unavailable``).
        OSError: a write failed (nothing was written; a full disk: `guarded`).
    """
    with writer.lock:
        lines = list(writer.journal.entries_newest_first())
        at = next((i for i, line in enumerate(lines) if line.get("id") == wanted), None)
        if at is None:
            return Answer.refused(identity.no_edit(wanted))
        spec = target_of(lines[at])
        if isinstance(spec, Refusal):
            return Answer.refused(spec)
        current = writer.store.read_identity(spec)
        soul = _soul(writer) if spec is CONVENTIONS else None
        ready = check(lines, at, current.entries, soul, withdrawn)
        if isinstance(ready, Refusal):
            return Answer.refused(ready)
        held = [o for o in ready.origins if o.kind != "owner" and needs_confirmation(o.label)]
        if held and not confirmed:
            return Answer.refused(said.revert_confirm_needed(wanted, held[0].described))
        data_class = max([class_of(ready.target), *(o.label.data_class for o in ready.origins)])
        reserved = writer.journal.reserve()
        extra: dict[str, Any] = {"reverts": wanted}
        appends: list[Append] = []
        decision = _decision(ready.target, reserved) if spec is CONVENTIONS else None
        if decision is not None:
            extra.update(proposal=decision["proposal_id"], proposals=[decision])
            appends.append(Append(PROPOSALS_FILE, encode_line(decision) + b"\n"))
        edit = writer.commit_edit(
            OWNER,
            "revert",
            current,
            Outcome(ready.restore.entries),
            extra,
            data_class=data_class,
            appends=appends,
            reserved=reserved,
        )
    applied = identity.updated(spec.name, text_length(ready.restore.entries), spec.limit)
    return Answer(said.reverted(wanted, edit, applied), OK, edit)


def _soul(writer: Writer) -> str | None:
    """soul.md's text for the steering budget (None when it cannot be read: the block says so)."""
    try:
        return writer.store.read_soul()
    except (FileUnreadable, FileOverLimit):  # the block's problem (it is refused), not this edit's
        return None


def _decision(target: dict[str, Any], reserved: Reserved) -> dict[str, Any] | None:
    """The review decision a revert of an accepted proposal's rule records (module docstring): the
    reverted line's decision turned round, ``accepted`` ↔ ``reverted``; None for other edits."""
    ident = target.get("proposal")
    decisions = target.get("proposals")
    if not isinstance(ident, str) or not isinstance(decisions, list):
        return None
    before = next(
        (d.get("status") for d in decisions if isinstance(d, dict) and d.get("proposal_id") == ident), None
    )
    if before not in ("accepted", "reverted"):
        return None
    return {
        "event": "decision",
        "proposal_id": ident,
        "status": "reverted" if before == "accepted" else "accepted",
        "decided_by": OWNER_SESSION,
        "decided_at": reserved.time,
        "edit": reserved.id,
    }


def revertable(writer: Writer, shown: Sequence[dict[str, Any]], withdrawn: Withdrawn | None) -> set[str]:
    """The ids of the journal lines `shown` whose edits `revert` would take back now, but for the
    owner's ``--yes`` (``bxctl memory log``'s ``revertable``); the whole journal is read only when
    something is withdrawn (to find who wrote what would come back)."""
    lines = list(writer.journal.entries_newest_first()) if withdrawn is not None else list(shown)[::-1]
    where = {str(line.get("id")): i for i, line in enumerate(lines)}
    files: dict[str, tuple[str, ...] | None] = {}
    for name, spec in UNDOABLE.items():
        try:
            files[name] = writer.store.read_identity(spec).entries
        except FileUnreadable:
            files[name] = None
    soul = _soul(writer)
    found: set[str] = set()
    for line in shown:
        ident, current = str(line.get("id")), files.get(str(line.get("where")))
        if current is None or ident not in where:
            continue
        ready = check(lines, where[ident], current, soul, withdrawn, full=False)
        if isinstance(ready, Ready):
            found.add(ident)
    return found
