"""The `memory` tool's ``propose`` action (seed 003 sections 17 and 23.5): a proposal waiting for the
owner, labelled by the session (a tainted session's is untrusted); `review.proposals` checks and files
it.
"""

from __future__ import annotations

from typing import Any

from boxmaker.memoryd.memory import Memory
from boxmaker.memoryd.review.proposals import ProposeArgs, propose
from boxmaker.memoryd.sentences import Refusal, promotion
from boxmaker.memoryd.tool.action import Action
from boxmaker.memoryd.tool.call import Call, answer
from boxmaker.memoryd.write.actions import convert
from boxmaker.proto.messages import ToolResponse


def parse_propose(arguments: dict[str, Any]) -> ProposeArgs | Refusal:
    """The `memory` tool's `propose` action, or ``refused:arguments`` (no refs: ``refused:refs``)."""
    if not arguments.get("refs") and isinstance(arguments.get("refs", []), list):
        return promotion.NO_SUPPORT
    result: ProposeArgs | Refusal = convert(arguments, ProposeArgs)
    return result


def _parse(call: Call) -> ProposeArgs | Refusal:
    return parse_propose(call.arguments)


def _apply(memory: Memory, call: Call, args: ProposeArgs) -> ToolResponse:
    return answer(call, propose(memory.writer, memory.controls, call.caller, args))


ACTIONS = (Action("propose", _parse, _apply),)
