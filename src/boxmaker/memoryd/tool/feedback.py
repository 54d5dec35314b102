"""The `memory` tool's ``feedback`` action (seed 003 section 23.2): a session's verdict on how the items
of one of its own retrievals served, recorded as is with ``recorded_by: session`` (a self-rating: weak
evidence for review). Any session may record; a tainted one's journal line says untrusted. The
arguments are checked by `review.feedback.record`.
"""

from __future__ import annotations

from typing import Any

from boxmaker.memoryd.memory import Memory
from boxmaker.memoryd.review.feedback import record
from boxmaker.memoryd.tool.action import Action
from boxmaker.memoryd.tool.call import Call, answer
from boxmaker.proto.messages import ToolResponse


def _parse(call: Call) -> dict[str, Any]:
    return call.arguments


def _apply(memory: Memory, call: Call, arguments: dict[str, Any]) -> ToolResponse:
    done = record(
        memory.writer,
        memory.recaller,
        arguments,
        session=call.session,
        call=call.call_id,
        untrusted=call.untrusted,
    )
    return answer(call, done)


ACTIONS = (Action("feedback", _parse, _apply),)
