"""The identity and note actions of the `memory` tool (M5a section 5): ``add``, ``replace``, ``remove``,
``consolidate`` on memory.md or user.md, and ``note`` (every note also a captured item, seed 003
section 9). Routing by the session's label is the writer's (`write.writer.Writer.memory`): a tainted
session's ``add`` becomes an untrusted note, its other identity edits are refused.
"""

from __future__ import annotations

from boxmaker.memoryd.memory import Memory
from boxmaker.memoryd.sentences import Refusal
from boxmaker.memoryd.tool.action import Action
from boxmaker.memoryd.tool.call import Call, answer
from boxmaker.memoryd.write.actions import MemoryAction, parse_memory
from boxmaker.memoryd.write.answer import guarded
from boxmaker.proto.messages import ToolResponse


def _parse(call: Call) -> MemoryAction | Refusal:
    return parse_memory(call.arguments)


def _apply(memory: Memory, call: Call, action: MemoryAction) -> ToolResponse:
    caller = call.caller
    return answer(call, guarded(lambda: memory.writer.memory(caller, action)))


ACTIONS = (
    Action("add", _parse, _apply, barred_in_maintenance=True),
    Action("replace", _parse, _apply, barred_in_maintenance=True),
    Action("remove", _parse, _apply, barred_in_maintenance=True),
    Action("consolidate", _parse, _apply, barred_in_maintenance=True),
    Action("note", _parse, _apply),
)

#: Any other action value (or none): its parse refuses it, naming the field (``refused:arguments``).
DEFAULT = Action("", _parse, _apply)
