"""The owner's withdrawals (seed 003 sections 12.1 and 12.2): ``withdraw`` (the receipt), ``reinstate``
and ``controls`` (every chain with its state)."""

from __future__ import annotations

from boxmaker.memoryd.admin.arguments import strings
from boxmaker.memoryd.admin.command import Command
from boxmaker.memoryd.admin.replies import refused
from boxmaker.memoryd.files.store import FileUnreadable
from boxmaker.memoryd.memory import Memory
from boxmaker.memoryd.sentences import Refusal, unavailable
from boxmaker.memoryd.withdrawal.receipts import withdraw
from boxmaker.memoryd.withdrawal.records import Scope
from boxmaker.proto.errors import InvalidBody
from boxmaker.proto.escape import escape
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply


def _withdraw(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    """The owner's withdrawal: the receipt (seed 12.1), or the refusal with ``data.code``."""
    reason = request.args.get("reason", "owner-decision")
    supersedes = request.args.get("supersedes")
    if not isinstance(reason, str) or not (supersedes is None or isinstance(supersedes, str)):
        raise InvalidBody("memory_admin", "withdraw takes a string reason and a string or null supersedes")
    scope = Scope(strings(request, "items"), strings(request, "archives"), strings(request, "sessions"))
    result = withdraw(memory.withdrawals, scope, reason, supersedes=supersedes or None)
    if isinstance(result, Refusal):
        return refused(result)
    return MemoryAdminReply(escape(result.text), result.data())


def _reinstate(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    reason = request.args.get("reason", "owner-decision")
    if not isinstance(reason, str):
        raise InvalidBody("memory_admin", "reinstate takes a string reason")
    try:
        result = memory.withdrawals.reinstate(request.arg, reason)
    except (OSError, FileUnreadable) as exc:
        return refused(unavailable(str(exc), "nothing was recorded"))
    if isinstance(result, Refusal):
        return refused(result)
    return MemoryAdminReply(result.text, {"code": "ok", "withdrawal": result.record.to_dict()})


def _controls(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    del request
    try:
        text, data = memory.withdrawals.listing()
    except OSError as exc:
        return refused(unavailable(str(exc), "nothing to list"))
    return MemoryAdminReply(escape(text), data)


COMMANDS = (
    Command(
        "withdraw",
        _withdraw,
        args=frozenset({"items", "archives", "sessions", "reason", "supersedes"}),
        takes_arg=False,
    ),
    Command("reinstate", _reinstate, args=frozenset({"reason"})),
    Command("controls", _controls, takes_arg=False),
)
