"""The `recall` and `memory` tools' arguments, validated (M5a sections 5 and 8).

`parse_memory` and `parse_recall` turn the model's JSON object into a typed action or a `Refusal`
(``refused:arguments``) whose sentence names the field. Lengths that have their own rule (a recall
query of 1 to 500 characters, ``refused:length``) are checked by the caller.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

import msgspec

from boxmaker.memoryd import sentences
from boxmaker.memoryd.edits import Item
from boxmaker.memoryd.sentences import Refusal

FileKey: TypeAlias = Literal["memory", "user"]


class _Action(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="action"):
    """Common base of the five actions, tagged by `action`."""


class Add(_Action, frozen=True, tag="add"):
    """``{"action": "add", "file", "text"}``."""

    file: FileKey
    text: str


class Replace(_Action, frozen=True, tag="replace"):
    """``{"action": "replace", "file", "old", "text"}``."""

    file: FileKey
    old: str
    text: str


class Remove(_Action, frozen=True, tag="remove"):
    """``{"action": "remove", "file", "old"}``."""

    file: FileKey
    old: str


class Note(_Action, frozen=True, tag="note"):
    """``{"action": "note", "text"}``."""

    text: str


class RawItem(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One consolidate item as sent."""

    old: str | None = None
    keep: bool | None = None
    text: str | None = None
    move: bool | None = None
    drop: bool | None = None


class Consolidate(_Action, frozen=True, tag="consolidate"):
    """``{"action": "consolidate", "file", "entries": [...]}``."""

    file: FileKey
    entries: Annotated[list[RawItem], msgspec.Meta(max_length=200)]


MemoryAction: TypeAlias = Add | Replace | Remove | Note | Consolidate


class TiersArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``{"action": "tiers", "untrusted": bool = false}``: the tiering listing (M5d 4.4; DESIGN 11)."""

    action: str
    untrusted: bool = False


def parse_tiers(arguments: dict[str, Any]) -> TiersArgs | Refusal:
    """The `memory` tool's `tiers` action, or ``refused:arguments``."""
    result: TiersArgs | Refusal = _convert(arguments, TiersArgs)
    return result


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
    result: IndexArgs | TopicArgs | Refusal = _convert(arguments, kind)
    return result


class RecallArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``{"query": string, "k": integer}``; `k` 1 to 10, default 5."""

    query: str
    k: Annotated[int, msgspec.Meta(ge=1, le=10)] = 5


def _convert(value: dict[str, Any], kind: Any) -> Any:
    try:
        return msgspec.convert(value, kind, strict=True)
    except msgspec.ValidationError as exc:
        return sentences.arguments(str(exc).replace("`$.", "`"))


def parse_memory(arguments: dict[str, Any]) -> MemoryAction | Refusal:
    """The `memory` tool's arguments as one of the five actions, or ``refused:arguments``."""
    if "action" not in arguments:
        return sentences.arguments("missing required field `action`")
    result: MemoryAction | Refusal = _convert(arguments, MemoryAction)
    return result


def parse_recall(arguments: dict[str, Any]) -> RecallArgs | Refusal:
    """The `recall` tool's arguments, or ``refused:arguments`` (k outside 1..10, wrong types)."""
    result: RecallArgs | Refusal = _convert(arguments, RecallArgs)
    return result


def items(raw: list[RawItem]) -> list[Item] | Refusal:
    """Consolidate items with exactly one of keep/text/move/drop when `old` is given, and only
    `text` otherwise (M5a section 5, Rules)."""
    result: list[Item] = []
    for item in raw:
        ops = [
            op
            for op, value in (
                ("keep", item.keep),
                ("text", item.text),
                ("move", item.move),
                ("drop", item.drop),
            )
            if value is not None
        ]
        if item.old is None:
            if ops != ["text"]:
                return sentences.CONSOLIDATE_SHAPE
            result.append(Item("new", None, item.text))
        elif len(ops) != 1 or (ops[0] != "text" and getattr(item, ops[0]) is not True):
            return sentences.CONSOLIDATE_SHAPE
        else:
            op: Literal["keep", "text", "move", "drop"] = ops[0]  # type: ignore[assignment]
            result.append(Item(op, item.old, item.text))
    return result
