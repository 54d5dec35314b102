"""The owner's commands over the admin socket: ``memory_admin`` (M5a sections 5 and 10; DESIGN 10.3).

| command | arg / args | does |
|---|---|---|
| status | | what runs: home, index size, review |
| log | arg: N (default 20) | the newest N journal lines, oldest first |
| undo | arg: edit id ("" = the latest edit of memory.md or user.md) | reverts it, or says why not |
| pending | | staged writes waiting for the owner |
| accept, reject | arg: pending id | applies (with every check) or discards one |
| files | | each file's usage against its limit (and soul.md with conventions.md); entries left out |
| show | | the memory block a new session would get now |
| search | arg: query; args: {"k": 1..50} | what is remembered, identity entries included |
| add | args: {"file": "memory"/"user", "text"} | the owner's own identity write, journalled as the owner |
| note | arg: text | the owner's own note |
| tiers | args: {"untrusted": bool} | each identity entry and note with its recall count (`tiers`) |
| withdraw | args: {"items", "archives", "sessions", "reason", "supersedes"} | a withdrawal; its receipt |
| reinstate | arg: withdrawal id; args: {"reason"} | reinstates it (same scope, superseding it) |
| controls | | every withdrawal control with its state (in-force, reinstated, superseded, conflicting) |
| note | args: {"kind", "subject", "confidence", "scope"} | the optional capture fields of a note |
| items | args: {"all", "kind", "status", "subject"} | the item store (erased items only with all) |
| item | arg: item id | one item, every seed 003 section 9 field |
| supersede | args: {"old", "new"} | `itemops.supersede` as the owner |
| item-status | arg: item id; args: {"status"} | `itemops.set_status` as the owner |
| archive | | runs the archive now (seed 003 section 13) and says what it appended |
| export | arg: absolute path; args: {"omit_withdrawn": bool} | writes a bundle there (`bundle`) |
| import | arg: absolute path; args: {"trusted": bool} | validates it whole, then imports it, or refuses |
| replay | arg: absolute path of a new or empty folder | rebuilds the files there from the journal |
| erase-plan | args: {"items", "sessions", "texts", "reserve", "held"} | what an erasure would change |
| erase | args: items, sessions, texts, authority, erasure_id, decided_at, holders, held | the tombstone |
| erasures | | the erasure tombstones (memory/erasures.jsonl) |
| proposals | args: {"all": bool} | pending proposals (all with `all`), refs and eligibility (`proposals`) |
| proposal-accept, proposal-reject | arg: proposal id; args: {"untrusted_ok"} | the decision |
| reconcile | arg: subject; args: {"keep"} | `itemops.reconcile` as the owner (seed 003 15.2.1) |
| review | | the cleanup plan (`plan`); changes nothing (seed 003 section 16) |
| feedback | args: retrieval, verdict, items, role, confidence, outcome, decision, evidence | owner event |
| feedback-of | arg: item id | the item's feedback events |
| warm | arg: item id | undoes autodream's `cool` (`itemops.warm` as the owner) |
| dream-show | arg: a pass's session ("" = every staged pass) | staged autodream passes (`dream`) |
| dream-apply, dream-discard | arg: a pass's session | applies each staged action (all checks) or closes it |

`text` is printed by bxctl as is (every entry in it escaped, `proto.escape`); `data` is what
``--json`` prints. A refused owner command still answers `memory_admin_reply`, with ``data.code``
saying ``refused:<reason>``.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from boxmaker.memoryd import sentences
from boxmaker.memoryd.erase import erase
from boxmaker.memoryd.files import pending as review
from boxmaker.memoryd.files.entries import CONVENTIONS, IDENTITY_FILES, SOUL_LIMIT, STEERING_LIMIT
from boxmaker.memoryd.files.store import STEERING, FileOverLimit, FileUnreadable
from boxmaker.memoryd.items import projections
from boxmaker.memoryd.items.store import CONFIDENCE_SCHEME, KINDS, STATUSES, Item, is_item_id
from boxmaker.memoryd.review import feedback as metamemory
from boxmaker.memoryd.review import plan, proposals
from boxmaker.memoryd.sentences import Refusal, capture
from boxmaker.memoryd.withdrawal.records import Scope
from boxmaker.memoryd.write import actions as arguments
from boxmaker.memoryd.write import itemops
from boxmaker.memoryd.write.actions import Add
from boxmaker.memoryd.write.writer import OWNER, Answer
from boxmaker.proto.errors import InvalidBody
from boxmaker.proto.escape import escape, escape_line
from boxmaker.proto.ids import OWNER_SESSION, parse_edit_id, parse_pending_id
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply

if TYPE_CHECKING:
    from boxmaker.memoryd.service import Memoryd

Command = Callable[["Memoryd", MemoryAdmin], MemoryAdminReply]


#: The commands that take no `arg`.
NO_ARG = frozenset(
    {
        "status",
        "pending",
        "files",
        "show",
        "add",
        "tiers",
        "withdraw",
        "controls",
        "items",
        "supersede",
        "archive",
        "erase-plan",
        "erase",
        "erasures",
        "proposals",
    }
)
#: The keys of `args` each command takes (any other key is refused, naming it).
ARGS: dict[str, frozenset[str]] = {
    "search": frozenset({"k"}),
    "add": frozenset({"file", "text"}),
    "tiers": frozenset({"untrusted"}),
    "withdraw": frozenset({"items", "archives", "sessions", "reason", "supersedes"}),
    "reinstate": frozenset({"reason"}),
    # The item store (issue 6: capture, supersede, status).
    "note": frozenset({"kind", "subject", "confidence", "scope"}),
    "items": frozenset({"all", "kind", "status", "subject"}),
    "supersede": frozenset({"old", "new"}),
    "export": frozenset({"omit_withdrawn"}),
    "import": frozenset({"trusted"}),
    # erasure (seed 003 section 12.3; `erase` module)
    "erase-plan": frozenset({"items", "sessions", "texts", "reserve", "held"}),
    "erase": frozenset(
        {"items", "sessions", "texts", "authority", "erasure_id", "decided_at", "holders", "held"}
    ),
}
ARGS["item-status"] = frozenset({"status"})
ARGS["proposals"] = frozenset({"all"})
ARGS["proposal-accept"] = frozenset({"untrusted_ok"})
# Skeptical recall, review and metamemory (issue 7; seed 003 sections 15.2.1, 16, 23).
NO_ARG = NO_ARG | {"review", "feedback"}
ARGS["reconcile"] = frozenset({"keep"})
ARGS["feedback"] = frozenset(
    {"retrieval", "verdict", "items", "role", "confidence", "outcome", "decision", "evidence"}
)
# Autodream (seed 003 section 14; `dream`): warm, dream-show, dream-apply, dream-discard take an arg only.


def handle(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    """Run one owner command.

    Raises:
        InvalidBody: for an unknown command or a malformed argument (an `error` reply naming it).
    """
    command = COMMANDS.get(request.command)
    if command is None:
        known = ", ".join(sorted(COMMANDS))
        raise InvalidBody("memory_admin", f"unknown command {request.command!r}; known: {known}")
    unknown = sorted(set(request.args) - ARGS.get(request.command, frozenset()))
    if unknown:
        raise InvalidBody("memory_admin", f"{request.command} takes no argument {unknown[0]!r}")
    if request.arg and request.command in NO_ARG:
        raise InvalidBody("memory_admin", f"{request.command} takes no arg, not {request.arg[:40]!r}")
    return command(memory, request)


def _answer(answer: Answer) -> MemoryAdminReply:
    return MemoryAdminReply(answer.output, {"code": answer.code, "edit": answer.edit or None})


def _status(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    del request
    data: dict[str, Any] = {
        "home": str(memory.config.home),
        "pid": os.getpid(),
        "review": memory.config.review,
        "max_class": memory.config.max_class.value,
        "sqlite": sqlite3.sqlite_version,
        "index_ready": memory.index.wait_ready(0),
    }
    review_state = "on" if memory.config.review else "off"
    try:
        counts = memory.index.counts()
    except sqlite3.Error as exc:
        data["index"] = None
        text = f"memoryd {os.getpid()} serving {memory.config.home}: the index cannot be read ({exc})"
        return MemoryAdminReply(f"{text}; review {review_state}", data)
    data["index"] = {"logs": counts.logs, "records": counts.records, "notes": counts.notes}
    building = "" if data["index_ready"] else " (still catching up)"
    text = (
        f"memoryd {os.getpid()} serving {memory.config.home}: {counts.records:,} records from "
        f"{counts.logs:,} logs and {counts.notes:,} notes indexed{building}; review {review_state}"
    )
    return MemoryAdminReply(text, data)


def _log(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    count = _count(request.arg or "20", "log")
    lines: list[dict[str, Any]] = []
    for entry in memory.journal.entries_newest_first():
        if len(lines) >= count:
            break
        lines.append(entry)
    lines.reverse()
    if not lines:
        return MemoryAdminReply("(the journal is empty)", [])
    return MemoryAdminReply("\n".join(_journal_text(e) for e in lines), lines)


def _journal_text(entry: dict[str, Any]) -> str:
    session = escape_line(str(entry.get("session", "?")))
    who = "the owner" if session == "owner" else f"session {session}"
    fields = [escape_line(str(entry.get(k, "?"))) for k in ("id", "time", "action", "where")]
    head = f"{fields[0]}  {fields[1]}  {fields[2]} {fields[3]}  by {who}"
    if entry.get("untrusted"):
        head += " (untrusted)"
    for key in ("pending", "undoes"):
        if entry.get(key):
            head += f"  {key} {entry[key]}"
    before, after = _texts(entry.get("before")), _texts(entry.get("after"))
    lines = [head]
    lines += [f"  - {escape_line(text)}" for text in before if text not in after]
    lines += [f"  + {escape_line(text)}" for text in after if text not in before]
    notes = entry.get("notes")
    for note in notes if isinstance(notes, list) else []:
        if isinstance(note, dict):
            lines.append(f"  > notes.md: {escape_line(str(note.get('header', '')))}")
    return "\n".join(lines)


def _texts(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _count(arg: str, command: str) -> int:
    if not re.fullmatch(r"[0-9]{1,6}", arg) or not 1 <= int(arg) <= 100_000:
        raise InvalidBody("memory_admin", f"{command} takes a count from 1 to 100,000, not {arg!r}")
    return int(arg)


def _undo(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    wanted = request.arg or None
    if wanted is not None:
        _valid(parse_edit_id, wanted)
    return _answer(memory.write(lambda: memory.writer.undo(wanted)))


def _valid(parse: Callable[[str], object], value: str) -> None:
    try:
        parse(value)
    except Exception as exc:
        raise InvalidBody("memory_admin", str(exc)) from None


def _pending(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    del request
    staged = review.pending(memory.store.pending_path)
    if not staged:
        return MemoryAdminReply("(nothing is waiting for review)", [])
    lines = []
    for event in staged:
        args = event["arguments"]
        head = [str(event.get(k, "?")) for k in ("id", "time")] + [
            str(args.get(k, "?")) for k in ("action", "file")
        ]
        lines.append(
            escape_line(f"{head[0]}  {head[1]}  {head[2]} {head[3]}.md  session {event.get('session', '?')}")
        )
        for key in ("old", "text"):
            if key in args:
                lines.append(f"  {key}: {escape_line(str(args[key]))}")
        entries = args.get("entries")
        for item in entries if isinstance(entries, list) else []:
            lines.append(f"  item: {escape_line(str(item))}")
    return MemoryAdminReply("\n".join(lines), staged)


def _accept(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    _valid(parse_pending_id, request.arg)
    return _answer(memory.write(lambda: memory.writer.accept(request.arg)))


def _reject(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    _valid(parse_pending_id, request.arg)
    return _answer(memory.write(lambda: memory.writer.reject(request.arg)))


def _files(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    del request
    rows: list[dict[str, Any]] = []
    soul: str | None = None
    try:
        soul = memory.store.read_soul()
        rows.append({"file": "soul.md", "size": len(soul), "limit": SOUL_LIMIT, "entries": None})
    except (FileUnreadable, FileOverLimit) as exc:
        rows.append({"file": "soul.md", "problem": str(exc)})
    try:
        conventions = memory.store.read_conventions()
        rows.append(
            {
                "file": CONVENTIONS.name,
                "size": conventions.size,
                "limit": CONVENTIONS.limit,
                "entries": len(conventions.entries),
            }
        )
        if soul is not None:
            both = len(soul) + conventions.size
            rows.append({"file": STEERING, "size": both, "limit": STEERING_LIMIT, "entries": None})
    except FileUnreadable as exc:
        rows.append({"file": CONVENTIONS.name, "problem": str(exc)})
    for spec in IDENTITY_FILES.values():
        try:
            file = memory.store.read_identity(spec)
            rows.append(
                {"file": spec.name, "size": file.size, "limit": spec.limit, "entries": len(file.entries)}
            )
        except FileUnreadable as exc:
            rows.append({"file": spec.name, "problem": str(exc)})
    rows.append({"file": "notes.md", "size": None, "limit": None, "entries": memory.index.counts().notes})
    left_out: list[dict[str, str]] = []
    try:
        block = memory.block()
        left_out = [{"file": i.file, "rule": i.rule, "entry": i.entry} for i in block.left_out]
    except Exception as exc:
        rows.append({"file": "(block)", "problem": str(exc)})
    lines = [_file_line(row) for row in rows]
    if left_out:
        lines.append("left out of the memory block (they fail the write check, or are withdrawn):")
        lines += [f"  {i['file']} ({i['rule']}): {escape_line(i['entry'])}" for i in left_out]
    return MemoryAdminReply("\n".join(lines), {"files": rows, "left_out": left_out})


def _plural(count: int, one: str, many: str | None = None) -> str:
    """``1 entry``, ``2 entries``, ``1,204 notes``."""
    return f"{count:,} {one if count == 1 else (many or one + 's')}"


def _file_line(row: dict[str, Any]) -> str:
    if "problem" in row:
        return f"{row['file']:<10} PROBLEM: {row['problem']}"
    if row["limit"] is None:
        return f"{row['file']:<10} {_plural(row['entries'], 'note')} (no limit)"
    flag = "  OVER LIMIT" if row["size"] > row["limit"] else ""
    count = "" if row["entries"] is None else f", {_plural(row['entries'], 'entry', 'entries')}"
    return f"{row['file']:<10} {row['size']:,} of {row['limit']:,} characters{count}{flag}"


def _show(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    del request
    block = memory.block()
    return MemoryAdminReply(escape(block.text), {"text": block.text})


def _search(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    k = request.args.get("k", 10)
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 50:
        raise InvalidBody("memory_admin", "search takes k from 1 to 50")
    try:
        hidden = memory.withdrawn_entries()
    except (OSError, FileUnreadable) as exc:
        return MemoryAdminReply(f"{exc}; nothing was searched", {"code": "refused:unavailable", "hits": []})
    result = memory.recaller.owner_search(request.arg, k, memory.store, hidden)
    if isinstance(result, sentences.Refusal):
        return MemoryAdminReply(result.sentence, {"code": result.code, "hits": []})
    return MemoryAdminReply(escape(result.text), {"code": "ok", "hits": result.data})


def _add(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    file, text = request.args.get("file"), request.args.get("text")
    if file not in IDENTITY_FILES or not isinstance(text, str):
        raise InvalidBody("memory_admin", 'add takes args {"file": "memory" or "user", "text": string}')
    return _answer(memory.write(lambda: memory.writer.memory(OWNER, Add(file=file, text=text))))


def _note(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    fields = {k: v for k, v in request.args.items() if v is not None}
    action = arguments.parse_memory({"action": "note", "text": request.arg, **fields})
    if isinstance(action, Refusal):
        return MemoryAdminReply(action.sentence, {"code": action.code, "edit": None})
    return _answer(memory.write(lambda: memory.writer.memory(OWNER, action)))


# The item store (issue 6; seed 003 sections 9 and 14.2) ----------------------------------------


def _items(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    """The items, erased ones only with ``all``; filtered by kind, status and subject (exact). A
    withdrawn item is shown, marked ``withdrawn (memwd-…)``, with ``withdrawn`` in its data and
    ``(withdrawn)`` in place of its text (withdrawn content stays out of listings; ``item ID`` shows it)."""
    wanted = {key: request.args.get(key) for key in ("kind", "status", "subject")}
    show_all = request.args.get("all", False)
    strings = all(v is None or isinstance(v, str) for v in wanted.values())
    if not isinstance(show_all, bool) or not strings:
        raise InvalidBody("memory_admin", "items takes args all (a boolean), kind, status, subject (strings)")
    if wanted["kind"] not in (None, *KINDS):
        raise InvalidBody("memory_admin", f"kind is state or knowledge, not {wanted['kind']!r}")
    if wanted["status"] not in (None, *STATUSES):
        raise InvalidBody("memory_admin", f"status is one of {', '.join(STATUSES)}, not {wanted['status']!r}")
    try:
        every = memory.writer.items.items()
        withdrawn = memory.withdrawals.controls.withdrawn_by()
    except OSError as exc:
        return MemoryAdminReply(f"{exc}; nothing to list", {"code": "refused:unavailable"})
    hidden = _hidden(every, withdrawn)
    shown = [
        item
        for item in every.values()
        if (show_all or not item.erased)
        and all(v is None or getattr(item, k) == v for k, v in wanted.items())
    ]
    data = [_item_data(item, withdrawn, listing=True) for item in shown]
    if not shown:
        return MemoryAdminReply("(no items)", data)
    return MemoryAdminReply("\n".join(_item_row(item, withdrawn, hidden) for item in shown), data)


def _hidden(every: dict[str, Item], withdrawn: dict[str, list[str]]) -> frozenset[str]:
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


def _item(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    """One item in seed 003 section 9's structured form."""
    _item_id(request.arg)
    try:
        every = memory.writer.items.items()
        withdrawn = memory.withdrawals.controls.withdrawn_by()
    except OSError as exc:
        return MemoryAdminReply(f"{exc}; nothing to show", {"code": "refused:unavailable"})
    item = every.get(request.arg)
    if item is None:
        refusal = capture.item_not_found(request.arg)
        return MemoryAdminReply(refusal.sentence, {"code": refusal.code})
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


def _item_id(value: str) -> None:
    if not is_item_id(value):
        raise InvalidBody("memory_admin", f"{value[:40]!r} is not an item id (mem-YYYY-MM-DD-NNN)")


def _supersede(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    old, new = request.args.get("old"), request.args.get("new")
    if not isinstance(old, str) or not isinstance(new, str):
        raise InvalidBody("memory_admin", 'supersede takes args {"old": item id, "new": item id}')
    _item_id(old)
    _item_id(new)
    return _answer(memory.write(lambda: itemops.supersede(memory.writer, old, new, OWNER)))


def _item_status(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    """``item-status ID`` with args {"status"}: `itemops.set_status` as the owner."""
    status = request.args.get("status")
    if not isinstance(status, str):
        raise InvalidBody("memory_admin", 'item-status takes an item id and args {"status": string}')
    _item_id(request.arg)
    return _answer(memory.write(lambda: itemops.set_status(memory.writer, request.arg, status, OWNER)))


def _tiers(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    """M5d section 4.4 and DESIGN 11: the listing the tiering job and the owner read (`tiers`)."""
    untrusted = request.args.get("untrusted", False)
    if not isinstance(untrusted, bool):
        raise InvalidBody("memory_admin", 'tiers takes args {"untrusted": true or false}')
    result = memory.tiers_listing(untrusted)
    if isinstance(result, Refusal):
        return MemoryAdminReply(result.sentence, {"code": result.code})
    return MemoryAdminReply(result.text, result.data)


# Withdrawal (seed 003 sections 12.1-12.2; `withdrawal`) ----------------------------------------------


def _strings(request: MemoryAdmin, key: str) -> tuple[str, ...]:
    value = request.args.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidBody("memory_admin", f"{request.command} takes args {{{key!r}: [string, ...]}}")
    return tuple(value)


def _withdraw(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    """The owner's withdrawal: the receipt (seed 12.1), or the refusal with ``data.code``."""
    reason = request.args.get("reason", "owner-decision")
    supersedes = request.args.get("supersedes")
    if not isinstance(reason, str) or not (supersedes is None or isinstance(supersedes, str)):
        raise InvalidBody("memory_admin", "withdraw takes a string reason and a string or null supersedes")
    scope = Scope(_strings(request, "items"), _strings(request, "archives"), _strings(request, "sessions"))
    result = memory.forget(scope, reason, supersedes=supersedes or None)
    if isinstance(result, Refusal):
        return MemoryAdminReply(result.sentence, {"code": result.code})
    return MemoryAdminReply(escape(result.text), result.data())


def _reinstate(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    reason = request.args.get("reason", "owner-decision")
    if not isinstance(reason, str):
        raise InvalidBody("memory_admin", "reinstate takes a string reason")
    try:
        result = memory.withdrawals.reinstate(request.arg, reason)
    except (OSError, FileUnreadable) as exc:
        return MemoryAdminReply(f"{exc}; nothing was recorded", {"code": "refused:unavailable"})
    if isinstance(result, Refusal):
        return MemoryAdminReply(result.sentence, {"code": result.code})
    return MemoryAdminReply(result.text, {"code": "ok", "withdrawal": result.record.to_dict()})


def _controls(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    del request
    try:
        text, data = memory.withdrawals.listing()
    except OSError as exc:
        return MemoryAdminReply(f"{exc}; nothing to list", {"code": "refused:unavailable"})
    return MemoryAdminReply(escape(text), data)


# Seed 003: archive, export/import, replay ---------------------------------------------------


def _path(request: MemoryAdmin) -> Path:
    path = Path(request.arg)
    if not request.arg or not path.is_absolute() or "\x00" in request.arg:
        raise InvalidBody(
            "memory_admin", f"{request.command} takes an absolute path, not {request.arg[:80]!r}"
        )
    return path


def _archive(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    del request
    try:
        done = memory.archive_now(OWNER_SESSION)
    except OSError as exc:
        return MemoryAdminReply(
            f"the archive cannot be written ({exc}); run it again", {"code": "refused:unavailable"}
        )
    return MemoryAdminReply(done.sentence(), {"code": "ok", "edit": done.edit, "files": done.files})


def _export(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    omit = request.args.get("omit_withdrawn", False)
    if not isinstance(omit, bool):
        raise InvalidBody("memory_admin", 'export takes args {"omit_withdrawn": true or false}')
    path = _path(request)
    made = memory.export(path, omit)
    if isinstance(made, Refusal):
        return MemoryAdminReply(made.sentence, {"code": made.code})
    text = (
        f"exported {_plural(len(made.ids), 'item')} with {_plural(len(made.controls), 'control')} to {path}"
        f" ({len(made.withdrawn):,} withdrawn, kept with their controls"
        + (f"; {len(made.omitted):,} withdrawn left out" if made.omitted else "")
        + ")"
    )
    data = {
        "code": "ok",
        "file": str(path),
        "items": made.ids,
        "withdrawn": made.withdrawn,
        "omitted": made.omitted,
        "controls": made.controls,
    }
    return MemoryAdminReply(escape(text), data)


def _import(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    """Import a bundle; its items untrusted unless args {"trusted": true}. The answer lists the
    withdrawals it added and every scope a new control left conflicting."""
    trusted = request.args.get("trusted", False)
    if not isinstance(trusted, bool):
        raise InvalidBody("memory_admin", 'import takes args {"trusted": true or false}')
    path = _path(request)
    done = memory.import_bundle(path, trusted)
    if isinstance(done, Refusal):
        return MemoryAdminReply(escape(done.sentence), {"code": done.code})
    plan, edit = done
    trust = "labels kept: --trusted" if trusted else "untrusted"
    text = (
        f"imported {_plural(len(plan.captures), 'item')} ({trust}) and "
        f"{_plural(len(plan.controls), 'control')} from {path.name} as {edit}"
    )
    if plan.skipped or plan.skipped_controls:
        text += (
            f"; already here and skipped: {len(plan.skipped):,} items, "
            f"{len(plan.skipped_controls):,} controls"
        )
    added = [c["withdrawal_id"] for c in plan.controls if c["action"] == "withdraw"]
    if added:
        text += f"\nwithdrawals added: {', '.join(added)}"
    new = {c["withdrawal_id"] for c in plan.controls}
    conflicting: list[dict[str, Any]] = []
    try:
        chains = memory.withdrawals.controls.chains() if new else []
    except OSError:
        chains = []
    for chain in chains:
        if chain.state == "conflicting" and new & {r.withdrawal_id for r in chain.records}:
            scope = msgspec.to_builtins(chain.scope)
            conflicting.append(
                {"scope": scope, "heads": [h.withdrawal_id for h in chain.heads], "why": chain.why}
            )
            text += f"\nscope now conflicting (excluded; reconcile with bxctl memory controls): {chain.why}"
    data = {
        "code": "ok",
        "edit": edit,
        "items": [e["id"] for e in plan.captures],
        "controls": [c["withdrawal_id"] for c in plan.controls],
        "skipped": plan.skipped,
        "skipped_controls": plan.skipped_controls,
        "trusted": trusted,
        "withdrawals_added": added,
        "conflicting": conflicting,
    }
    return MemoryAdminReply(escape(text), data)


def _replay(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    path = _path(request)
    done = memory.replay_into(path)
    if isinstance(done, Refusal):
        return MemoryAdminReply(escape(done.sentence), {"code": done.code})
    text = f"replayed the journal into {path}: {_plural(len(done), 'file')}"
    return MemoryAdminReply(
        escape("\n".join([text, *(f"  {f}" for f in done)])), {"code": "ok", "files": done}
    )


# Erasure (seed 003 section 12.3) ---------------------------------------------------------------------


def _erase_plan(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    """What an erasure would change in memoryd's files (nothing is changed). `data.texts` are for
    bxctl to pass to loopd and brokerd; bxctl never prints them."""
    result = erase.plan(memory, request.args)
    if isinstance(result, Refusal):
        return MemoryAdminReply(result.sentence, {"code": result.code})
    lines = [f"memoryd ({result['erasure_id']}): scope {', '.join(result['scope_refs'])}"]
    for row in result["holders"]:
        holds = "?" if row["holds"] is None else _plural(row["holds"], "match", "matches")
        lines.append(f"  {row['holder_ref']}: {holds}")
    return MemoryAdminReply("\n".join(lines), {"code": "ok", **result})


def _erase(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    """Erase in memoryd's files and write the tombstone (`erase.execute`)."""
    result = erase.execute(memory, request.args)
    if isinstance(result, Refusal):
        return MemoryAdminReply(result.sentence, {"code": result.code})
    return MemoryAdminReply(erase.describe(result), {"code": "ok", "tombstone": result})


def _erasures(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    """The erasure tombstones, oldest first."""
    del request
    found = erase.tombstones(memory.config.layout.memory)
    if not found:
        return MemoryAdminReply("(no erasures)", [])
    return MemoryAdminReply("\n".join(erase.describe(t) for t in found), found)


# Promotion (seed 003 sections 17 and 23.5; `proposals`) ---------------------------------------------


def _proposals(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    """Pending proposals (every one with ``all``), with refs and eligibility; never a write."""
    show_all = request.args.get("all", False)
    if not isinstance(show_all, bool):
        raise InvalidBody("memory_admin", 'proposals takes args {"all": true or false}')
    result = proposals.listing(memory, show_all)
    if isinstance(result, Refusal):
        return MemoryAdminReply(result.sentence, {"code": result.code})
    text, rows = result
    return MemoryAdminReply(text, rows)


def _proposal_decision(accept: bool) -> Command:
    def decide(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
        if not proposals.is_proposal_id(request.arg):
            raise InvalidBody(
                "memory_admin", f"{request.arg[:40]!r} is not a proposal id (mempolicy-YYYY-MM-DD-NNN)"
            )
        untrusted_ok = request.args.get("untrusted_ok") is True
        return _answer(memory.write(lambda: proposals.decide(memory, request.arg, accept, untrusted_ok)))

    return decide


# Skeptical recall, review and metamemory (issue 7; seed 003 sections 15.2.1, 16, 23) -------------


def _reconcile(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    """``reconcile SUBJECT`` with args {"keep": item id}: `itemops.reconcile` as the owner."""
    keep = request.args.get("keep")
    if not request.arg or not isinstance(keep, str):
        raise InvalidBody("memory_admin", 'reconcile takes a subject and args {"keep": item id}')
    _item_id(keep)
    return _answer(memory.write(lambda: itemops.reconcile(memory.writer, request.arg, keep, OWNER)))


def _review(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    """The review plan (`plan.review`): text and data; nothing is changed."""
    del request
    try:
        text, data = plan.review(memory)
    except (OSError, FileUnreadable) as exc:
        return MemoryAdminReply(f"{exc}; no plan was made", {"code": "refused:unavailable"})
    return MemoryAdminReply(text, data)


def _feedback(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    """The owner's feedback event (`Memoryd.record_feedback`, ``recorded_by: owner``); the reply's
    data: ``{"code", "edit", "feedback_id"}`` (the new ``memfb-`` id once recorded)."""
    answer = memory.record_feedback(dict(request.args))
    reply = _answer(answer)
    recorded = re.search(r"\bmemfb-\d{4}-\d{2}-\d{2}-\d{3,}\b", answer.output) if answer.ok else None
    if recorded is not None and isinstance(reply.data, dict):
        reply.data["feedback_id"] = recorded.group(0)
    return reply


def _feedback_of(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    """Every feedback event naming item ``arg``, oldest first; ``refused:not-found`` for an id the
    store does not hold."""
    _item_id(request.arg)
    if memory.items.get(request.arg) is None:
        refusal = capture.item_not_found(request.arg)
        return MemoryAdminReply(refusal.sentence, {"code": refusal.code})
    try:
        found = metamemory.of_item(metamemory.read_feedback(memory.config.layout.memory), request.arg)
    except OSError as exc:
        return MemoryAdminReply(f"{exc}; nothing to list", {"code": "refused:unavailable"})
    if not found:
        return MemoryAdminReply(f"(no feedback on {request.arg})", [])
    return MemoryAdminReply("\n".join(metamemory.describe(e) for e in found), found)


# Autodream (seed 003 section 14; `dream`) -----------------------------------------------------------


def _warm(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    """``warm ID``: undo autodream's cool of a knowledge item (`itemops.warm` as the owner)."""
    _item_id(request.arg)
    excluded = memory.excluded()
    return _answer(memory.write(lambda: itemops.warm(memory.writer, request.arg, OWNER, excluded)))


def _dream_reply(result: tuple[str, Any] | Refusal) -> MemoryAdminReply:
    if isinstance(result, Refusal):
        return MemoryAdminReply(result.sentence, {"code": result.code})
    return MemoryAdminReply(escape(result[0]), result[1])


def _dream_show(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    return _dream_reply(memory.dream.show(request.arg or None))


def _dream_apply(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    return _dream_reply(memory.dream.apply(request.arg))


def _dream_discard(memory: Memoryd, request: MemoryAdmin) -> MemoryAdminReply:
    return _dream_reply(memory.dream.discard(request.arg))


COMMANDS: dict[str, Command] = {
    "status": _status,
    "log": _log,
    "undo": _undo,
    "pending": _pending,
    "accept": _accept,
    "reject": _reject,
    "files": _files,
    "show": _show,
    "search": _search,
    "add": _add,
    "note": _note,
    "tiers": _tiers,
    "withdraw": _withdraw,
    "reinstate": _reinstate,
    "controls": _controls,
    "items": _items,
    "item": _item,
    "supersede": _supersede,
    "item-status": _item_status,
    "archive": _archive,
    "export": _export,
    "import": _import,
    "replay": _replay,
    "erase-plan": _erase_plan,
    "erase": _erase,
    "erasures": _erasures,
    "proposals": _proposals,
    "proposal-accept": _proposal_decision(True),
    "proposal-reject": _proposal_decision(False),
    "reconcile": _reconcile,
    "review": _review,
    "feedback": _feedback,
    "feedback-of": _feedback_of,
    "warm": _warm,
    "dream-show": _dream_show,
    "dream-apply": _dream_apply,
    "dream-discard": _dream_discard,
}
