"""The owner's view and edits of the item store (seed 003 sections 9, 14.2 and 15.2.1): ``items``, ``item``
(seed 9's structured form), ``supersede``, ``item-status``, ``reconcile`` and ``warm``, each change
through `write.itemops` as the owner."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from boxmaker.memoryd.admin.arguments import item_id
from boxmaker.memoryd.admin.command import Command
from boxmaker.memoryd.admin.replies import answer, refused
from boxmaker.memoryd.items import projections
from boxmaker.memoryd.items.store import CONFIDENCE_SCHEME, KINDS, STATUSES, Item
from boxmaker.memoryd.memory import Memory, excluded
from boxmaker.memoryd.sentences import capture, unavailable
from boxmaker.memoryd.write import itemops
from boxmaker.memoryd.write.answer import OWNER, guarded
from boxmaker.proto.errors import InvalidBody
from boxmaker.proto.escape import escape_line
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply


def _items(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    """The items, erased ones only with ``all``; filtered by kind, status and subject (exact). A
    withdrawn item is shown, marked ``withdrawn (memwd-…)``, with ``withdrawn`` in its data and
    ``(withdrawn)`` in place of its text (withdrawn content stays out of listings; ``item ID`` shows it)."""
    wanted = {key: request.args.get(key) for key in ("kind", "status", "subject")}
    show_all = request.args.get("all", False)
    limit = request.args.get("limit", 0)
    skip = request.args.get("offset", 0)
    strings = all(v is None or isinstance(v, str) for v in wanted.values())
    counted = all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (limit, skip))
    if not isinstance(show_all, bool) or not strings or not counted:
        raise InvalidBody(
            "memory_admin",
            "items takes args all (a boolean), kind, status, subject (strings), limit (0 or more; 0: all), "
            "offset (0 or more: the newest to skip)",
        )
    if wanted["kind"] not in (None, *KINDS):
        raise InvalidBody("memory_admin", f"kind is state or knowledge, not {wanted['kind']!r}")
    if wanted["status"] not in (None, *STATUSES):
        raise InvalidBody("memory_admin", f"status is one of {', '.join(STATUSES)}, not {wanted['status']!r}")
    try:
        every = memory.items.items()
        withdrawn = memory.controls.withdrawn_by()
    except OSError as exc:
        return refused(unavailable(str(exc), "nothing to list"))
    hidden = _hidden(every, withdrawn)
    shown = [
        item
        for item in every.values()
        if (show_all or not item.erased)
        and all(v is None or getattr(item, k) == v for k, v in wanted.items())
    ]
    end = max(0, len(shown) - skip)
    older = max(0, end - limit) if limit else 0
    shown = shown[older:end]  # the newest `limit` after `offset`: a home of 100,000 items lists in a blink
    data = [_item_data(item, withdrawn, listing=True) for item in shown]
    if not shown:
        return MemoryAdminReply("(no items)", data)
    rows = [_item_row(item, withdrawn, hidden) for item in shown]
    head = [capture.items_older(older)] if older else []
    return MemoryAdminReply("\n".join(head + rows), data)


def _hidden(every: Mapping[str, Item], withdrawn: dict[str, list[str]]) -> frozenset[str]:
    """The ids a pointer may not name: withdrawn or erased items."""
    return frozenset(withdrawn) | {i for i, item in every.items() if item.erased}


def _status_word(item: Item, withdrawn: dict[str, list[str]], hidden: frozenset[str]) -> str:
    if item.erased:
        return "erased"
    pointer = projections.successor(item, hidden)
    status = f"superseded → {pointer}" if pointer else item.status
    if item.merged_into:
        status += f" · merged into {item.merged_into}"
    elif item.cooled:
        status += " · cooled"
    if item.id in withdrawn:
        mark = f"withdrawn ({', '.join(withdrawn[item.id])})"
        return mark if item.status == "active" else f"{mark} · {status}"
    return status


def _label_word(item: Item) -> str:
    label = item.label.data_class.value + (" · untrusted" if item.label.untrusted else "")
    return label + (" · imported" if item.imported else "")


def _item_row(item: Item, withdrawn: dict[str, list[str]], hidden: frozenset[str]) -> str:
    status = _status_word(item, withdrawn, hidden)
    text = WITHDRAWN_TEXT if item.id in withdrawn else escape_line(item.text)
    snippet = text if len(text) <= 60 else text[:59] + "…"
    fields = [item.id, item.date, item.kind, status, escape_line(item.subject or "-"), _label_word(item)]
    return "  ".join([*fields, escape_line(item.source)]) + "  " + snippet


#: What a listing shows in place of a withdrawn item's text.
WITHDRAWN_TEXT = "(withdrawn)"


def _item_data(item: Item, withdrawn: dict[str, list[str]], listing: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = msgspec.to_builtins(item)
    data["withdrawn"] = list(withdrawn.get(item.id, []))
    if listing and item.id in withdrawn:
        data["text"] = WITHDRAWN_TEXT
    return data


def _item(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    """One item in seed 003 section 9's structured form."""
    item_id(request.arg)
    try:
        every = memory.items.items()
        withdrawn = memory.controls.withdrawn_by()
    except OSError as exc:
        return refused(unavailable(str(exc), "nothing to show"))
    item = every.get(request.arg)
    if item is None:
        refusal = capture.item_not_found(request.arg)
        return refused(refusal)
    hidden = _hidden(every, withdrawn)
    return MemoryAdminReply(_structured(item, withdrawn, hidden), _item_data(item, withdrawn))


def _structured(item: Item, withdrawn: dict[str, list[str]], hidden: frozenset[str]) -> str:
    """Seed 003 section 9's canonical structured form, escaped, with the label and the capture."""
    text = escape_line(item.text) if not item.erased else "(erased)"
    if item.id in withdrawn and not item.erased:
        text = f"(withdrawn; kept out of listings and recall, shown because you asked for it) {text}"
    lines = [f"- [{item.date}] ({item.kind}) {text}"]
    after = item.superseded_by
    if after is not None and after in hidden:
        after += " (withdrawn)" if after in withdrawn else " (erased)"
    fields: list[tuple[str, str | None]] = [
        ("id", item.id),
        ("kind", item.kind),
        ("subject", item.subject),
        ("Scope", item.scope),
        ("Status", "erased" if item.erased else item.status),
        ("withdrawn", ", ".join(withdrawn[item.id]) if item.id in withdrawn else None),
        ("superseded_by", after),
        ("merged_into", item.merged_into),
        ("cooled", "true" if item.cooled else None),
        ("topic", item.topic),
        ("inspired_by", item.inspired_by),
        ("imported", item.imported),
    ]
    lines += [f"  - {key}: {escape_line(value)}" for key, value in fields if value is not None]
    if item.corroborating_refs:
        lines.append("  - corroborating_refs:")
        lines += [f"    - {escape_line(ref)}" for ref in item.corroborating_refs]
    lines.append(f"  - Source: {escape_line(item.source)}")
    if item.confidence is not None:
        lines.append(f"  - Confidence-Scheme: {item.confidence_scheme or CONFIDENCE_SCHEME}")
        lines.append(f"  - Confidence: {item.confidence}")
    lines.append(f"  - label: {_label_word(item)}")
    who, anchor = escape_line(item.session), escape_line(item.captured_from)
    lines.append(f"  - captured: {item.time} by {who} from {anchor}")
    if item.note:
        lines.append(f"  - note: {item.note}")
    return "\n".join(lines)


def _supersede(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    old, new = request.args.get("old"), request.args.get("new")
    if not isinstance(old, str) or not isinstance(new, str):
        raise InvalidBody("memory_admin", 'supersede takes args {"old": item id, "new": item id}')
    item_id(old)
    item_id(new)
    return answer(guarded(lambda: itemops.supersede(memory.writer, old, new, OWNER)))


def _item_status(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    """``item-status ID`` with args {"status"}: `itemops.set_status` as the owner."""
    status = request.args.get("status")
    if not isinstance(status, str):
        raise InvalidBody("memory_admin", 'item-status takes an item id and args {"status": string}')
    item_id(request.arg)
    return answer(guarded(lambda: itemops.set_status(memory.writer, request.arg, status, OWNER)))


def _reconcile(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    """``reconcile SUBJECT`` with args {"keep": item id}: `itemops.reconcile` as the owner."""
    keep = request.args.get("keep")
    if not request.arg or not isinstance(keep, str):
        raise InvalidBody("memory_admin", 'reconcile takes a subject and args {"keep": item id}')
    item_id(keep)
    return answer(guarded(lambda: itemops.reconcile(memory.writer, request.arg, keep, OWNER)))


def _warm(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    """``warm ID``: undo autodream's cool of a knowledge item (`itemops.warm` as the owner)."""
    item_id(request.arg)
    hidden = excluded(memory)
    return answer(guarded(lambda: itemops.warm(memory.writer, request.arg, OWNER, hidden)))


COMMANDS = (
    Command(
        "items",
        _items,
        args=frozenset({"all", "kind", "status", "subject", "limit", "offset"}),
        takes_arg=False,
    ),
    Command("item", _item),
    Command("supersede", _supersede, args=frozenset({"old", "new"}), takes_arg=False),
    Command("item-status", _item_status, args=frozenset({"status"})),
    Command("reconcile", _reconcile, args=frozenset({"keep"})),
    Command("warm", _warm),
)
