"""Changes to the item store: supersede and status (seed 003 sections 9 and 14.2; DESIGN 8).

Both take the writer (its lock and journal), the caller and the ids, decide against the item log as it
is inside the lock, and commit one journal line whose ``events`` carry the one event they append to
``items.jsonl`` (`journal.Change`), or refuse with a fixed sentence (`sentences`) and nothing changed.
The caller is the owner (`writer.OWNER`, from ``bxctl memory supersede`` / ``status``) or a session:
the next issue's distillation job calls these same functions with its own `writer.Caller`.

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
"""

from __future__ import annotations

from typing import Any

from boxmaker.memoryd import sentences
from boxmaker.memoryd.items import ITEMS_FILE, Item, active_by_subject, is_item_id
from boxmaker.memoryd.journal import Append, Change, Reserved, encode_line
from boxmaker.memoryd.sentences import Refusal
from boxmaker.memoryd.writer import Answer, Caller, Writer

#: The statuses a status change sets.
SETTABLE = ("active", "stale", "pending-cleanup")
#: The statuses only the owner sets.
OWNER_ONLY = ("active", "stale")


def supersede(writer: Writer, old: str, new: str, by: Caller) -> Answer:
    """Record that item `new` supersedes item `old` (module docstring), or refuse.

    Returns:
        ``ok`` with the journal edit id, or a refusal (nothing changed).

    Raises:
        OSError: when the item log cannot be read or the commit cannot be written.
    """
    for value in (old, new):
        if not is_item_id(value):
            return Answer.refused(sentences.item_id_invalid(value))
    with writer.lock:
        items = writer.items.items()
        decided = _decide_supersede(items, old, new, by)
        if isinstance(decided, Refusal):
            return Answer.refused(decided)
        prior, current = decided
        subject = str(prior.subject)
        reserved = writer.journal.reserve()
        event = {
            "event": "supersede",
            "time": reserved.time,
            "old": prior.id,
            "new": current.id,
            "subject": subject,
            "prior": {"date": prior.date, "text": prior.text},
            "current": {"date": current.date, "text": current.text},
            "by": by.session,
            "edit": reserved.id,
        }
        line = writer.journal.commit(_change(by, "supersede", event, reserved))
    return Answer(sentences.superseded(old, new, subject), sentences.OK, str(line["id"]))


def _decide_supersede(items: dict[str, Item], old: str, new: str, by: Caller) -> tuple[Item, Item] | Refusal:
    for value in (old, new):
        found = items.get(value)
        if found is None or found.erased:
            return sentences.item_not_found(value)
    prior, current = items[old], items[new]
    if old == new:
        return sentences.SUPERSEDE_ITSELF
    if prior.kind != "state" or current.kind != "state":
        return sentences.supersede_kind(old, new)
    if prior.subject is None or prior.subject != current.subject:
        return sentences.supersede_subject(old, new)
    for item in (prior, current):
        if item.status != "active":
            return sentences.supersede_status(item.id, item.status)
    order = list(items)
    if order.index(new) < order.index(old):
        return sentences.supersede_order(old, new)
    if prior.trusted and (not current.trusted or by.label.untrusted):
        return sentences.supersede_tainted(old, new)
    return prior, current


def set_status(writer: Writer, ident: str, status: str, by: Caller) -> Answer:
    """Set item `ident`'s status (module docstring), or refuse.

    Returns:
        ``ok`` with the journal edit id, or a refusal (nothing changed).

    Raises:
        OSError: when the item log cannot be read or the commit cannot be written.
    """
    if not is_item_id(ident):
        return Answer.refused(sentences.item_id_invalid(ident))
    if status not in SETTABLE:
        return Answer.refused(sentences.status_invalid(status))
    if status in OWNER_ONLY and not by.owner:
        return Answer.refused(sentences.status_denied(status))
    with writer.lock:
        item = writer.items.get(ident)
        if item is None or item.erased:
            return Answer.refused(sentences.item_not_found(ident))
        if item.status == "superseded":
            return Answer.refused(sentences.status_of_history(ident))
        if item.status == status:
            return Answer.refused(sentences.status_same(ident, status))
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
    return Answer(sentences.status_set(ident, item.status, status), sentences.OK, str(line["id"]))


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
        return Answer.refused(sentences.item_id_invalid(keep))
    if not by.owner:
        return Answer.refused(sentences.RECONCILE_DENIED)
    with writer.lock:
        items = writer.items.items()
        active = active_by_subject(items.values()).get(subject, [])
        kept = items.get(keep)
        if kept is None or kept.erased:
            return Answer.refused(sentences.item_not_found(keep))
        if kept not in active:
            return Answer.refused(sentences.reconcile_keep(keep, subject))
        if len(active) < 2:
            return Answer.refused(sentences.reconcile_nothing(subject, len(active)))
        others = [item for item in active if item.id != keep]
        for prior in others:
            if prior.trusted and not kept.trusted:
                return Answer.refused(sentences.supersede_tainted(prior.id, keep))
        reserved = writer.journal.reserve()
        events = [
            {
                "event": "supersede",
                "time": reserved.time,
                "old": prior.id,
                "new": kept.id,
                "subject": subject,
                "prior": {"date": prior.date, "text": prior.text},
                "current": {"date": kept.date, "text": kept.text},
                "by": by.session,
                "edit": reserved.id,
                "reconcile": True,
            }
            for prior in others
        ]
        change = _change(by, "reconcile", events[0], reserved)
        change.entry["events"] = events
        change.appends = [Append(ITEMS_FILE, b"".join(encode_line(e) + b"\n" for e in events))]
        line = writer.journal.commit(change)
    ids = [item.id for item in others]
    return Answer(sentences.reconciled(subject, keep, ids), sentences.OK, str(line["id"]))
