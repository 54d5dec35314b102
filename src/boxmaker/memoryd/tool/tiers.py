"""The `memory` tool's ``tiers`` action (M5d section 4.4; DESIGN 11): the tiering listing as a tool
result, labelled with the strictest label of what it shows, so reading untrusted notes taints the
session (``"untrusted": true`` asks for their text).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from boxmaker.memoryd.memory import Memory
from boxmaker.memoryd.review.tiering import listing_now
from boxmaker.memoryd.review.tiers import DEFAULT_PAGE, MAX_PAGE
from boxmaker.memoryd.sentences import Refusal
from boxmaker.memoryd.tool.action import Action
from boxmaker.memoryd.tool.call import Call, refuse
from boxmaker.memoryd.write.actions import convert
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.messages import ToolResponse


class TiersArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``{"action": "tiers", "untrusted": bool = false, "offset": int = 0, "limit": int = 200}``: the
    tiering listing, one page of notes (M5d 4.4; DESIGN 11; `tiers.listing`; limit 0: a full page)."""

    action: str
    untrusted: bool = False
    offset: Annotated[int, msgspec.Meta(ge=0)] = 0
    limit: Annotated[int, msgspec.Meta(ge=0)] = DEFAULT_PAGE


def parse_tiers(arguments: dict[str, Any]) -> TiersArgs | Refusal:
    """The `memory` tool's `tiers` action, or ``refused:arguments``."""
    result: TiersArgs | Refusal = convert(arguments, TiersArgs)
    return result


def _parse(call: Call) -> TiersArgs | Refusal:
    return parse_tiers(call.arguments)


def _apply(memory: Memory, call: Call, args: TiersArgs) -> ToolResponse:
    result = listing_now(
        memory.store,
        memory.journal,
        memory.controls,
        memory.recaller.recalls,
        args.untrusted,
        offset=args.offset,
        limit=args.limit or MAX_PAGE,
    )
    if isinstance(result, Refusal):
        return refuse(call, result)
    shown = result.data["label"]
    label = Label(DataClass(shown["class"]), bool(shown["untrusted"]))
    return ToolResponse(call.call_id, result.text, "ok", label)


ACTIONS = (Action("tiers", _parse, _apply),)
