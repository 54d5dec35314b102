"""The core tools every session declares (M5a sections 5 and 9).

The model sees `clock`, `recall`, `memory`, `find_tool` and `call_tool`; their schemas are part of the
baseline and count toward its 3,000 tokens (M5a section 1.5). `recall` and `memory` take the argument
shapes of M5a section 5; `find_tool` and `call_tool` reach the other tools brokerd's grants offer.
Every call, the core ones included, goes to brokerd as a `tool_request`; `call_tool` is unwrapped
first, so the grant of the tool it names decides it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from boxmaker.proto.messages import MEMORY_ACTIONS

CORE_TOOL_NAMES = ("clock", "recall", "memory", "find_tool", "call_tool")
#: Autodream's maintenance actions (seed 003 section 14), listed only in a maintenance job's runs
#: (`core_tools(maintenance=True)`), with their argument properties; memoryd checks every call itself.
MAINTENANCE_ACTIONS = ("dream-input", "supersede", "mark", "cool", "merge", "assign")
_MAINTENANCE_PROPERTIES: dict[str, Any] = {
    "date": {"type": "string", "description": "dream-input: YYYY-MM-DD"},
    "new": {"type": "string"},
    "id": {"type": "string"},
    "ids": {"type": "array", "items": {"type": "string"}},
    "status": {"enum": ["pending-cleanup"]},
    "triggers": {"type": "array", "items": {"type": "string"}},
}
_MAINTENANCE_SAID = (
    "note: a fact or lesson. Maintenance: dream-input "
    "(the day's archive), supersede {old,new} (state), mark {id,status}, cool {id}, merge {ids,text}, "
    "assign {id,topic,triggers} (knowledge: never delete)."
)
#: The live actions a maintenance pass keeps, and the properties only live sessions' actions use.
MAINTENANCE_BASE = ("note", "index", "topic", "propose")
_LIVE_ONLY = (
    "file",
    "old",
    "entries",
    "sessions",
    "items",
    "retrieval",
    "verdict",
    "role",
    "evidence",
    "outcome",
)

_TOOL_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,63}\Z")

_STRING: dict[str, Any] = {"type": "string"}
_ARRAY: dict[str, Any] = {"type": "array"}


def _enum(*values: str) -> dict[str, Any]:
    """A choice of strings: the enum alone says the type (JSON Schema), a few baseline tokens less."""
    return {"enum": list(values)}


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def memory_properties() -> dict[str, Any]:
    """The `memory` tool's argument properties (a new dict each call). Compact on purpose: the schema
    counts toward the baseline's 3,000 tokens (docs/decisions.md); memoryd and brokerd check every
    value (ranges, forms, which keys an action takes) and answer with a sentence naming the field.

    Shared names: `text` is a note's or entry's text and a proposal's rule; `items` are item ids (forget,
    feedback); `confidence` is a capture's epistemic status or feedback's attribution confidence.
    propose: `target`, `text`, `refs`, `benefit`, `risk`. feedback: `retrieval`, `verdict`, `role`,
    `confidence`, `items`, `evidence`, `outcome`.
    """
    return {
        "action": _enum(*MEMORY_ACTIONS),
        "text": _STRING,
        "kind": _enum("state", "knowledge"),
        "subject": _STRING,
        "confidence": _enum("confirmed", "observed-once", "inferred", "unknown", "low", "medium", "high"),
        "scope": _STRING,
        "file": _enum("memory", "user"),
        "old": _STRING,
        "entries": {"type": "array", "description": "each entry once: {old, keep|text|move|drop}"},
        "untrusted": {"type": "boolean"},
        "items": _ARRAY,
        "sessions": _ARRAY,
        "topic": _STRING,
        "target": _STRING,
        "refs": _ARRAY,
        "benefit": _STRING,
        "risk": _STRING,
        "retrieval": _STRING,
        "verdict": _enum("helpful", "misleading", "neutral", "unknown"),
        "role": _STRING,
        "evidence": _ARRAY,
        "outcome": _STRING,
    }


def core_tools(maintenance: bool = False) -> list[dict[str, Any]]:
    """The core tools' schemas in OpenAI `tools` form, in a fixed order (a new list each call).

    With `maintenance` (a run of a maintenance job only: loopd decides by the job file, never by what
    a session asks), the `memory` tool offers what a maintenance pass may do instead of what a live
    session may: capture (`note`), read (`index`, `topic`), `propose`, and the maintenance actions;
    the identity edits, `tiers`, `forget` and `feedback` are left out (memoryd refuses the identity
    edits and `forget` for such a session anyway), which keeps that baseline within its 3,000 tokens.
    """
    tools = _core_tools()
    if maintenance:
        memory = tools[2]["function"]
        memory["description"] = _MAINTENANCE_SAID
        params = memory["parameters"]["properties"]
        for key in _LIVE_ONLY:
            del params[key]
        params["action"]["enum"] = [*MAINTENANCE_BASE, *MAINTENANCE_ACTIONS]
        params.update(_MAINTENANCE_PROPERTIES)
    return tools


def _core_tools() -> list[dict[str, Any]]:
    return [
        _function("clock", "Current UTC date and time.", {}, []),
        _function(
            "recall",
            "Search earlier sessions and notes.",
            {"query": _STRING, "k": {"type": "integer", "minimum": 1, "maximum": 10}},
            ["query"],
        ),
        _function(
            "memory",
            "add/replace/remove/consolidate: memory.md (yours) or user.md (owner's) entries, by full "
            "text. feedback: on recalled items.",
            memory_properties(),
            ["action"],
        ),
        _function("find_tool", "List your other tools and their arguments.", {"query": _STRING}, []),
        _function(
            "call_tool",
            "Run a tool that find_tool listed.",
            {"name": _STRING, "arguments": {"type": "object"}},
            ["name"],
        ),
    ]


@dataclass(frozen=True, slots=True)
class Routed:
    """Where a model's tool call goes: the tool brokerd decides and its arguments, or why not.

    `problem` is a sentence for the model when the call cannot be sent (arguments that are not a
    JSON object, an unknown tool); then `tool` is the model's name and `arguments` empty.
    """

    tool: str
    arguments: dict[str, Any]
    problem: str | None = None


def route(name: str, arguments: str) -> Routed:
    """Turn a model's tool call (name, JSON string of arguments) into what brokerd is asked.

    `call_tool` is unwrapped: ``{"name": "http_fetch", "arguments": {...}}`` becomes the call of
    `http_fetch`. Anything that is not a core tool is still sent to brokerd, which refuses it unless
    a grant allows it (models sometimes call a listed tool directly). Never raises.
    """
    if not _TOOL_NAME.match(name):
        return Routed(name[:64], {}, f"there is no tool named {name[:64]!r}; find_tool lists the tools")
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError as exc:
        return Routed(name, {}, f"the arguments of {name} are not valid JSON ({exc}); send a JSON object")
    if not isinstance(parsed, dict):
        return Routed(name, {}, f"the arguments of {name} must be a JSON object")
    if name != "call_tool":
        return Routed(name, parsed)
    inner = parsed.get("name")
    inner_args = parsed.get("arguments", {})
    if isinstance(inner_args, str):
        try:
            inner_args = json.loads(inner_args) if inner_args.strip() else {}
        except ValueError:
            return Routed(name, {}, "call_tool: 'arguments' must be a JSON object")
    if not isinstance(inner, str) or not inner:
        return Routed(name, {}, "call_tool needs 'name', the tool to run (see find_tool)")
    if not isinstance(inner_args, dict):
        return Routed(name, {}, "call_tool: 'arguments' must be a JSON object")
    if not _TOOL_NAME.match(inner):
        return Routed(name, {}, f"there is no tool named {inner[:64]!r}; find_tool lists the tools")
    if inner == "call_tool":
        return Routed(name, {}, "call_tool cannot run call_tool")
    return Routed(inner, inner_args)
