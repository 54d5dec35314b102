"""Changes to the item store: supersede and status (seed 003 sections 9 and 14.2; DESIGN 8).

Both take the writer (its lock and journal), the caller and the ids, decide against the item log as it
is inside the lock, and commit one journal line whose ``events`` carry the one event they append to
``items.jsonl`` (`journal.Change`), or refuse with a fixed sentence (`sentences`) and nothing changed.
The caller is the owner (`answer.OWNER`, from ``bxctl memory supersede`` / ``status``) or a session:
the next issue's distillation job calls these same functions with its own `answer.Caller`.

`supersede(old, new)` (seed 14.2's four constraints, "when in doubt, do not supersede"): both items
exist and are not erased (``refused:not-found``), differ (``refused:arguments``), are both
``kind: state`` (``refused:kind``), have subjects equal as strings, no trimming, no case folding
(``refused:subject``), are both active (``refused:status``), `new` was captured after `old`
(``refused:order``), and an untrusted item never supersedes a trusted one, nor does a caller that has
read untrusted content (``refused:tainted``). One event makes `old` superseded with `superseded_by`
pointing at `new`, so two items of one subject are never both active through a supersede; it records
the subject, the prior date and text and the current date and text (journal action ``supersede``).

`set_status(id, status)`: ``active``, ``stale`` or ``pending-cleanup`` (``superseded`` only through
supersede: ``refused:arguments``); never on a superseded item (history: ``refused:status``), nor to the
status it has. ``stale`` and ``active`` come from the owner only (``refused:denied``): automation never
sets ``stale`` (seed 9) and at most marks ``pending-cleanup``, which review clears (seed 16). Journal
action ``status``, or ``pending-cleanup`` when that is the new status.

Autodream's changes (seed 003 sections 14.1-14.3; the `dream` module calls them for a maintenance run,
the owner's ``bxctl memory warm`` calls `warm`): `cool` (a knowledge item demoted, journal action
``cool``), `warm` (undone, ``warm``), `merge` (one consolidated knowledge item captured like a note,
whose Source enumerates every member's, dated by the newest member, the members getting
``merged_into``; ``merge``) and `assign` (topic and triggers; ``assign``). Nothing is deleted and no
knowledge text is overwritten. Every change here and in `supersede`/`set_status` takes `excluded` (the
withdrawal predicate): a withdrawn item is ``refused:withdrawn``; and a caller that has read untrusted
content never changes a trusted item (``refused:tainted``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from boxmaker.memoryd import sentences
from boxmaker.memoryd.files.journal import Append, Change, Reserved, encode_line
from boxmaker.memoryd.files.names import ITEMS_FILE
from boxmaker.memoryd.items.live import Fold
from boxmaker.memoryd.items.projections import Excluded, nothing_excluded, slugify
from boxmaker.memoryd.items.store import Item, is_item_id, label_of, merge_source
from boxmaker.memoryd.sentences import Refusal, capture, dream, review
from boxmaker.memoryd.write.actions import check_field
from boxmaker.memoryd.write.answer import Answer, Caller
from boxmaker.memoryd.write.writer import Writer
from boxmaker.proto.labels import Label

#: The statuses a status change sets.
SETTABLE = ("active", "stale", "pending-cleanup")
#: The statuses only the owner sets.
OWNER_ONLY = ("active", "stale")


def supersede_event(prior: Item, current: Item, subject: str, by: str, reserved: Reserved) -> dict[str, Any]:
    """The ``supersede`` item event (seed 003 section 14.2's log: subject, prior and new date and
    value), committed under the reserved edit id."""
    return {
        "event": "supersede",
        "time": reserved.time,
        "old": prior.id,
        "new": current.id,
        "subject": subject,
        "prior": {"date": prior.date, "text": prior.text},
        "current": {"date": current.date, "text": current.text},
        "by": by,
        "edit": reserved.id,
    }


def supersede(
    writer: Writer, old: str, new: str, by: Caller, excluded: Excluded = nothing_excluded
) -> Answer:
    """Record that item `new` supersedes item `old` (module docstring), or refuse.

    Returns:
        ``ok`` with the journal edit id, or a refusal (nothing changed).

    Raises:
        OSError: when the item log cannot be read or the commit cannot be written.
    """
    for value in (old, new):
        if not is_item_id(value):
            return Answer.refused(capture.item_id_invalid(value))
    with writer.lock:
        fold = writer.items.latest()
        decided = _visible(fold.items, (old, new), excluded) or _decide_supersede(fold, old, new, by)
        if isinstance(decided, Refusal):
            return Answer.refused(decided)
        prior, current = decided
        subject = str(prior.subject)
        reserved = writer.journal.reserve()
        event = supersede_event(prior, current, subject, by.session, reserved)
        line = writer.journal.commit(_change(by, "supersede", event, reserved))
    return Answer(capture.superseded(old, new, subject), sentences.OK, str(line["id"]))


def _decide_supersede(fold: Fold, old: str, new: str, by: Caller) -> tuple[Item, Item] | Refusal:
    items = fold.items
    for value in (old, new):
        found = items.get(value)
        if found is None or found.erased:
            return capture.item_not_found(value)
    prior, current = items[old], items[new]
    if old == new:
        return capture.SUPERSEDE_ITSELF
    if prior.kind != "state" or current.kind != "state":
        return capture.supersede_kind(old, new)
    if prior.subject is None or prior.subject != current.subject:
        return capture.supersede_subject(old, new)
    for item in (prior, current):
        if item.status != "active":
            return capture.supersede_status(item.id, item.status)
    if fold.position(new) < fold.position(old):
        return capture.supersede_order(old, new)
    if prior.trusted and (not current.trusted or by.label.untrusted):
        return capture.supersede_tainted(old, new)
    return prior, current


def set_status(
    writer: Writer, ident: str, status: str, by: Caller, excluded: Excluded = nothing_excluded
) -> Answer:
    """Set item `ident`'s status (module docstring), or refuse.

    Returns:
        ``ok`` with the journal edit id, or a refusal (nothing changed).

    Raises:
        OSError: when the item log cannot be read or the commit cannot be written.
    """
    if not is_item_id(ident):
        return Answer.refused(capture.item_id_invalid(ident))
    if status not in SETTABLE:
        return Answer.refused(capture.status_invalid(status))
    if status in OWNER_ONLY and not by.owner:
        return Answer.refused(capture.status_denied(status))
    with writer.lock:
        item = writer.items.latest().items.get(ident)
        if item is None or item.erased:
            return Answer.refused(capture.item_not_found(ident))
        refused = _touchable(item, by, excluded)
        if refused is not None:
            return Answer.refused(refused)
        if item.status == "superseded":
            return Answer.refused(capture.status_of_history(ident))
        if item.status == status:
            return Answer.refused(capture.status_same(ident, status))
        reserved = writer.journal.reserve()
        event = {
            "event": "status",
            "time": reserved.time,
            "id": ident,
            "status": status,
            "prior": item.status,
            "by": by.session,
            "edit": reserved.id,
        }
        action = "pending-cleanup" if status == "pending-cleanup" else "status"
        line = writer.journal.commit(_change(by, action, event, reserved))
    return Answer(capture.status_set(ident, item.status, status), sentences.OK, str(line["id"]))


def _change(by: Caller, action: str, event: dict[str, Any], reserved: Reserved) -> Change:
    entry = {
        "session": by.session,
        "call": by.call,
        "untrusted": by.label.untrusted,
        "action": action,
        "file": ITEMS_FILE,
        "where": ITEMS_FILE,
        "before": [],
        "after": [],
        "events": [event],
    }
    return Change(entry, [Append(ITEMS_FILE, encode_line(event) + b"\n")], reserved=reserved)


def reconcile(writer: Writer, subject: str, keep: str, by: Caller) -> Answer:
    """The owner's reconcile (seed 003 sections 15.2.1 and 16, a human-only transition): every other
        active state item of `subject` (erased ones aside) is superseded by `keep`, in one journal line
        (action ``reconcile``) whose ``events`` carry one ``supersede`` event per item, each marked
        ``"reconcile": true``. Unlike `supersede`, the kept item may be the older one: the owner decides
        which value is current; an untrusted item is still never kept over a trusted one (``refused:tainted``:
    set the trusted one stale instead, `set_status`), as exported bundles require. Only the owner
    reconciles (``refused:denied``); `keep` must be an active
        state item of exactly `subject` (``refused:subject``); a subject with fewer than two active state
        items has nothing to reconcile (``refused:status``).

        Raises:
            OSError: when the item log cannot be read or the commit cannot be written.
    """
    if not is_item_id(keep):
        return Answer.refused(capture.item_id_invalid(keep))
    if not by.owner:
        return Answer.refused(review.RECONCILE_DENIED)
    with writer.lock:
        fold = writer.items.latest()
        active = fold.active_of(subject)
        kept = fold.items.get(keep)
        if kept is None or kept.erased:
            return Answer.refused(capture.item_not_found(keep))
        if kept not in active:
            return Answer.refused(review.reconcile_keep(keep, subject))
        if len(active) < 2:
            return Answer.refused(review.reconcile_nothing(subject, len(active)))
        others = [item for item in active if item.id != keep]
        for prior in others:
            if prior.trusted and not kept.trusted:
                return Answer.refused(capture.supersede_tainted(prior.id, keep))
        reserved = writer.journal.reserve()
        events = [
            {**supersede_event(prior, kept, subject, by.session, reserved), "reconcile": True}
            for prior in others
        ]
        change = _change(by, "reconcile", events[0], reserved)
        change.entry["events"] = events
        change.appends = [Append(ITEMS_FILE, b"".join(encode_line(e) + b"\n" for e in events))]
        line = writer.journal.commit(change)
    ids = [item.id for item in others]
    return Answer(review.reconciled(subject, keep, ids), sentences.OK, str(line["id"]))


def _visible(items: Mapping[str, Item], idents: Sequence[str], excluded: Excluded) -> Refusal | None:
    """``refused:withdrawn`` for the first of `idents` that is withdrawn (unknown ids pass here)."""
    for ident in idents:
        found = items.get(ident)
        if found is not None and not found.erased and excluded(found):
            return dream.item_withdrawn(ident)
    return None


def _touchable(item: Item, by: Caller, excluded: Excluded) -> Refusal | None:
    """Why `by` may not change `item`: withdrawn, or trusted while `by` has read untrusted content."""
    if excluded(item):
        return dream.item_withdrawn(item.id)
    if item.trusted and by.label.untrusted:
        return dream.item_tainted(item.id)
    return None


def _known(items: Mapping[str, Item], ident: str, by: Caller, excluded: Excluded) -> Item | Refusal:
    if not is_item_id(ident):
        return capture.item_id_invalid(ident)
    item = items.get(ident)
    if item is None or item.erased:
        return capture.item_not_found(ident)
    return _touchable(item, by, excluded) or item


def _one_event(writer: Writer, by: Caller, action: str, event: dict[str, Any]) -> str:
    """Commit one item event (the caller holds the lock); returns the edit id."""
    reserved = writer.journal.reserve()
    event = {"event": action, "time": reserved.time, **event, "by": by.session, "edit": reserved.id}
    line = writer.journal.commit(_change(by, action, event, reserved))
    return str(line["id"])


def cool(writer: Writer, ident: str, by: Caller, excluded: Excluded = nothing_excluded) -> Answer:
    """Demote knowledge item `ident` (seed 003 section 14.3's cooling; event and action ``cool``):
    its topic shows it under "Historical lessons" and index.md's recent activity leaves it out.
    Refused: not knowledge (``refused:kind``), already cooled or merged (``refused:status``),
    withdrawn, tainted over trusted.

    Raises:
        OSError: when the item log cannot be read or the commit cannot be written.
    """
    with writer.lock:
        item = _known(writer.items.latest().items, ident, by, excluded)
        if isinstance(item, Refusal):
            return Answer.refused(item)
        if item.kind != "knowledge":
            return Answer.refused(dream.knowledge_only(ident, item.kind, "cool"))
        if item.merged_into is not None:
            return Answer.refused(dream.merged_already(ident, item.merged_into))
        if item.cooled:
            return Answer.refused(dream.cooled_already(ident, True))
        edit = _one_event(writer, by, "cool", {"id": ident})
    return Answer(dream.cooled(ident), sentences.OK, edit)


def warm(writer: Writer, ident: str, by: Caller, excluded: Excluded = nothing_excluded) -> Answer:
    """Undo `cool` (the owner's ``bxctl memory warm``; event and action ``warm``); refused when the
    item is not cooled (``refused:status``).

    Raises:
        OSError: when the item log cannot be read or the commit cannot be written.
    """
    with writer.lock:
        item = _known(writer.items.latest().items, ident, by, excluded)
        if isinstance(item, Refusal):
            return Answer.refused(item)
        if not item.cooled:
            return Answer.refused(dream.cooled_already(ident, False))
        edit = _one_event(writer, by, "warm", {"id": ident})
    return Answer(dream.warmed(ident), sentences.OK, edit)


def assign(
    writer: Writer,
    ident: str,
    topic: str,
    triggers: Sequence[str],
    by: Caller,
    *,
    excluded: Excluded = nothing_excluded,
) -> Answer:
    """Give item `ident` a topic (a slug, `projections.slugify`) and triggers (event and action
    ``assign``): the projections put it on ``topics/<topic>.md`` and add its triggers to the topic's.
    The topic and every trigger first pass the capture fields' whole write check
    (`actions.check_field`: one line, not blank, every rule of `rules.check_text`, ``secret``
    included), refused with the rule's code and a sentence naming the field; they are stored
    NFC-normalised and stripped. Refused too: a topic with no letters or digits
    (``refused:arguments``), withdrawn, tainted over trusted.

    Raises:
        OSError: when the item log cannot be read or the commit cannot be written.
    """
    checked_topic = check_field("topic", topic)
    if isinstance(checked_topic, Refusal):
        return Answer.refused(checked_topic)
    checked: list[str] = []
    for trigger in triggers:
        result = check_field("triggers", trigger)
        if isinstance(result, Refusal):
            return Answer.refused(result)
        checked.append(result)
    topic, triggers = checked_topic, checked
    name = slugify(topic)
    if not name:
        return Answer.refused(dream.topic_invalid(topic))
    with writer.lock:
        item = _known(writer.items.latest().items, ident, by, excluded)
        if isinstance(item, Refusal):
            return Answer.refused(item)
        edit = _one_event(writer, by, "assign", {"id": ident, "topic": name, "triggers": list(triggers)})
    return Answer(dream.assigned(ident, name, list(triggers)), sentences.OK, edit)


def merge(
    writer: Writer, members: Sequence[str], text: str, by: Caller, excluded: Excluded = nothing_excluded
) -> Answer:
    """Fold two or more knowledge items into one consolidated item (seed 003 section 14.3), or refuse.

    The new item is captured like a note (notes.md and a capture event, the text passing the note's
    write check), kind knowledge, labelled with the strictest of the members' labels and the caller's;
    a ``merge`` event in the same commit (journal action ``merge``) gives it `sources` (every member's
    Source, in the order named), the Source ``merge: a; b`` and the newest member's date, and each
    member ``merged_into``. The members are not changed otherwise: they stay, as history, and the
    archive holds them. Refused: fewer than two or repeated ids (``refused:arguments``), a member
    that is unknown, state (``refused:kind``), superseded, stale or already merged
    (``refused:status``), withdrawn, or trusted while the caller is tainted.

    Raises:
        OSError: when the item log cannot be read or the commit cannot be written.
    """
    wanted = list(members)
    if len(wanted) < 2 or len(set(wanted)) != len(wanted) or len(wanted) > 20:
        return Answer.refused(dream.MERGE_MEMBERS)
    for ident in wanted:
        if not is_item_id(ident):
            return Answer.refused(capture.item_id_invalid(ident))

    def plan(
        items: Mapping[str, Item], new: str, time: str, edit: str
    ) -> tuple[Label, list[dict[str, Any]], str] | Refusal:
        found: list[Item] = []
        for ident in wanted:
            item = _known(items, ident, by, excluded)
            if isinstance(item, Refusal):
                return item
            if item.kind != "knowledge":
                return dream.knowledge_only(ident, item.kind, "merge")
            if item.merged_into is not None:
                return dream.merged_already(ident, item.merged_into)
            if item.status in ("superseded", "stale"):
                return dream.merge_history(ident, item.status)
            found.append(item)
        sources = [item.source for item in found]
        event = {
            "event": "merge",
            "time": time,
            "id": new,
            "members": wanted,
            "sources": sources,
            "date": max(item.date for item in found),
            "by": by.session,
            "edit": edit,
        }
        label = label_of(found).stricter(by.label)
        return label, [event], dream.merged(wanted, new) + f" (Source: {merge_source(sources)})"

    return writer.note(by, text, "merge", plan=plan)
