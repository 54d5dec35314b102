"""The `memory` tool's ``index`` and ``topic`` actions (seed 003 sections 10 and 11, checklist 2): the
generated index.md or a topic page, rendered from the item store as it is now with withdrawn items left
out, and labelled with the strictest label of the items it shows (DESIGN 11), so reading untrusted
items taints the session.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from boxmaker.memoryd.memory import Memory, excluded
from boxmaker.memoryd.sentences import Refusal, unavailable
from boxmaker.memoryd.tool.action import Action
from boxmaker.memoryd.tool.call import Call, refuse
from boxmaker.memoryd.write.actions import convert
from boxmaker.proto.messages import ToolResponse


class IndexArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``{"action": "index"}``: memory/index.md, the agent's warm entry (seed 003 section 10)."""

    action: str


class TopicArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``{"action": "topic", "topic": "<name>"}``: one topic page (seed 003 section 11); ``.md`` may
    be given or not."""

    action: str
    topic: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]


def parse_read(arguments: dict[str, Any]) -> IndexArgs | TopicArgs | Refusal:
    """The `memory` tool's `index` or `topic` action, or ``refused:arguments``."""
    kind = TopicArgs if arguments.get("action") == "topic" else IndexArgs
    result: IndexArgs | TopicArgs | Refusal = convert(arguments, kind)
    return result


def _parse(call: Call) -> IndexArgs | TopicArgs | Refusal:
    return parse_read(call.arguments)


def _apply(memory: Memory, call: Call, args: IndexArgs | TopicArgs) -> ToolResponse:
    try:
        memory.items.current()
        excluded(memory)
    except OSError as exc:
        return refuse(call, unavailable(f"items.jsonl cannot be read ({exc})", "nothing to show"))
    page = memory.pages.topic_named(args.topic) if isinstance(args, TopicArgs) else memory.pages.page(None)
    if page is None or isinstance(page, Refusal):
        return refuse(call, page or unavailable("the index page cannot be made", "nothing to show"))
    return ToolResponse(call.call_id, page.text, "ok", page.label)


ACTIONS = (Action("index", _parse, _apply), Action("topic", _parse, _apply))
