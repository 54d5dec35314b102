"""The `recall` tool (M5a sections 5 and 6; seed 003 section 15.2): ``{"query", "k"}``, answered by
`index.recall.Recaller` with skeptical framing and labelled with the strictest label of its hits.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from boxmaker.memoryd.memory import Memory
from boxmaker.memoryd.sentences import Refusal
from boxmaker.memoryd.tool.call import Call, refuse
from boxmaker.memoryd.write.actions import convert
from boxmaker.proto.messages import ToolResponse


class RecallArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``{"query": string, "k": integer}``; `k` 1 to 10, default 5."""

    query: str
    k: Annotated[int, msgspec.Meta(ge=1, le=10)] = 5


def parse_recall(arguments: dict[str, Any]) -> RecallArgs | Refusal:
    """The `recall` tool's arguments, or ``refused:arguments`` (k outside 1..10, wrong types)."""
    result: RecallArgs | Refusal = convert(arguments, RecallArgs)
    return result


def run(memory: Memory, call: Call) -> ToolResponse:
    """Answer one recall: the hits' text and label, or the refusal (a query outside 1..500 characters,
    the index not ready or unreadable)."""
    parsed = parse_recall(call.arguments)
    if isinstance(parsed, Refusal):
        return refuse(call, parsed)
    via = call.via.record() if call.via is not None else None
    result = memory.recaller.recall(parsed.query, parsed.k, session=call.session, via=via)
    if isinstance(result, Refusal):
        return refuse(call, result)
    return ToolResponse(call.call_id, result.text, "ok", result.label)
