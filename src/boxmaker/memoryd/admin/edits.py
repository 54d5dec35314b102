"""The owner's edits of identity and notes, and the review of staged writes (M5a sections 5 and 10):
``undo``, ``revert`` (issue 19: any edit, entry by entry; `write.revert`), ``pending``, ``accept``,
``reject``, ``add``, ``remove``, ``replace``, ``note``; each write goes through the writer with every
rule, journalled as the owner's."""

from __future__ import annotations

from collections.abc import Sequence

from boxmaker.memoryd.admin.arguments import valid
from boxmaker.memoryd.admin.command import Command
from boxmaker.memoryd.admin.replies import answer, refused
from boxmaker.memoryd.files import pending
from boxmaker.memoryd.files.entries import IDENTITY_FILES
from boxmaker.memoryd.memory import Memory
from boxmaker.memoryd.sentences import Refusal, unavailable
from boxmaker.memoryd.write.actions import Add, parse_memory
from boxmaker.memoryd.write.answer import OWNER, guarded
from boxmaker.memoryd.write.origin import identity_rule
from boxmaker.memoryd.write.revert import Withdrawn, revert
from boxmaker.memoryd.write.staged import staged_origin
from boxmaker.proto.errors import InvalidBody
from boxmaker.proto.escape import escape_line
from boxmaker.proto.ids import parse_edit_id, parse_pending_id
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply


def _undo(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    wanted = request.arg or None
    if wanted is not None:
        valid(parse_edit_id, wanted)
    return answer(guarded(lambda: memory.writer.undo(wanted)))


def _revert(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    valid(parse_edit_id, request.arg)
    confirmed = request.args.get("yes") is True
    try:
        rule = withdrawn_rule(memory)
    except OSError as exc:
        return refused(unavailable(str(exc), "nothing was reverted"))
    return answer(guarded(lambda: revert(memory.writer, request.arg, confirmed=confirmed, withdrawn=rule)))


def withdrawn_rule(memory: Memory) -> Withdrawn | None:
    """Whether an identity entry is withdrawn now (`withdrawal.exclusion.withdrawn_entries`'s rule: its
    text is a withdrawn item's, or a withdrawn session wrote it); None when nothing is withdrawn.

    Raises:
        OSError: controls.jsonl or items.jsonl cannot be read.
    """
    excluded = memory.controls.exclusion()
    if not excluded:
        return None

    def withdrawn(file: str, text: str, writers: Sequence[str]) -> bool:
        del file
        return text in excluded.texts or any(excluded.session(s) for s in writers)

    return withdrawn


def _pending(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    del request
    staged = pending.pending(memory.store.pending_path)
    if not staged:
        return MemoryAdminReply("(nothing is waiting for review)", [])
    lines = []
    for event in staged:
        args = event["arguments"]
        head = [str(event.get(k, "?")) for k in ("id", "time")] + [
            str(args.get(k, "?")) for k in ("action", "file")
        ]
        origin = staged_origin(event)
        held = "" if identity_rule(origin).applies else "  (held back: accepting it is your edit)"
        lines.append(
            escape_line(f"{head[0]}  {head[1]}  {head[2]} {head[3]}.md  from {origin.described}{held}")
        )
        for key in ("old", "text"):
            if key in args:
                lines.append(f"  {key}: {escape_line(str(args[key]))}")
        entries = args.get("entries")
        for item in entries if isinstance(entries, list) else []:
            lines.append(f"  item: {escape_line(str(item))}")
    return MemoryAdminReply("\n".join(lines), staged)


def _accept(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    valid(parse_pending_id, request.arg)
    confirmed = request.args.get("yes") is True
    return answer(guarded(lambda: memory.writer.accept(request.arg, confirmed)))


def _reject(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    valid(parse_pending_id, request.arg)
    return answer(guarded(lambda: memory.writer.reject(request.arg)))


def _add(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    file, text = request.args.get("file"), request.args.get("text")
    if file not in IDENTITY_FILES or not isinstance(text, str):
        raise InvalidBody("memory_admin", 'add takes args {"file": "memory" or "user", "text": string}')
    return answer(guarded(lambda: memory.writer.memory(OWNER, Add(file=file, text=text))))


def _identity_edit(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    """``remove`` {file, old} and ``replace`` {file, old, text}: the `memory` tool's actions of the same
    names, by the owner (the write check and the limit apply; a removed or replaced entry goes to
    notes.md as a moved one; journalled as the owner's)."""
    action = parse_memory({"action": request.command, **request.args})
    if isinstance(action, Refusal):
        return MemoryAdminReply(action.sentence, {"code": action.code, "edit": None})
    return answer(guarded(lambda: memory.writer.memory(OWNER, action)))


def _note(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    fields = {k: v for k, v in request.args.items() if v is not None}
    action = parse_memory({"action": "note", "text": request.arg, **fields})
    if isinstance(action, Refusal):
        return MemoryAdminReply(action.sentence, {"code": action.code, "edit": None})
    return answer(guarded(lambda: memory.writer.memory(OWNER, action)))


COMMANDS = (
    Command("undo", _undo),
    Command("revert", _revert, args=frozenset({"yes"})),
    Command("pending", _pending, takes_arg=False),
    Command("accept", _accept, args=frozenset({"yes"})),
    Command("reject", _reject),
    Command("add", _add, args=frozenset({"file", "text"}), takes_arg=False),
    Command("remove", _identity_edit, args=frozenset({"file", "old"}), takes_arg=False),
    Command("replace", _identity_edit, args=frozenset({"file", "old", "text"}), takes_arg=False),
    Command("note", _note, args=frozenset({"kind", "subject", "confidence", "scope"})),
)
