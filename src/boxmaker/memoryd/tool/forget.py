"""The `memory` tool's ``forget`` action (seed 003 sections 12.1 and 12.2): a session that has not read
untrusted content withdraws captured items and sessions on the owner's request; the answer is the
surface receipt. A tainted session is refused (``refused:tainted``) before its arguments are read.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from boxmaker.memoryd.memory import Memory
from boxmaker.memoryd.sentences import Refusal, withdrawal
from boxmaker.memoryd.tool.action import Action
from boxmaker.memoryd.tool.call import Call, refuse
from boxmaker.memoryd.withdrawal.receipts import withdraw
from boxmaker.memoryd.withdrawal.records import Scope
from boxmaker.memoryd.write.actions import convert
from boxmaker.proto.messages import ToolResponse


class ForgetArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``{"action": "forget", "items": [mem ids], "sessions": [session ids], "reason"?}``: withdraw
    captured items and sessions on the owner's request (seed 003 sections 12.1-12.2). At least one
    item or session; `reason` one of `records.REASONS` (default ``owner-decision``)."""

    action: str
    items: Annotated[list[str], msgspec.Meta(max_length=100)] = msgspec.field(default_factory=list)
    sessions: Annotated[list[str], msgspec.Meta(max_length=100)] = msgspec.field(default_factory=list)
    reason: str = "owner-decision"


def parse_forget(arguments: dict[str, Any]) -> ForgetArgs | Refusal:
    """The `memory` tool's `forget` action, or ``refused:arguments``."""
    result: ForgetArgs | Refusal = convert(arguments, ForgetArgs)
    return result


def _parse(call: Call) -> ForgetArgs | Refusal:
    if call.untrusted:
        return withdrawal.FORGET_TAINTED
    return parse_forget(call.arguments)


def _apply(memory: Memory, call: Call, args: ForgetArgs) -> ToolResponse:
    scope = Scope(tuple(args.items), (), tuple(args.sessions))
    result = withdraw(memory.withdrawals, scope, args.reason, session=call.session, call=call.call_id)
    if isinstance(result, Refusal):
        return refuse(call, result)
    return ToolResponse(call.call_id, result.text, "ok", None)


ACTIONS = (Action("forget", _parse, _apply, barred_in_maintenance=True),)
