"""The `recall` and `memory` tools: what the model can do with its memory (brokerd's socket; M5a
sections 5 and 8, seed 003).

`call` answers one decided call. `recall` is its own tool (`recall`); every `memory` action is one
entry of `ACTIONS`, declared by its handler module beside its argument parse and its apply:

| module | actions |
|---|---|
| `identity` | add, replace, remove, consolidate, note (and any unknown action: its refusal) |
| `read` | index, topic |
| `tiers` | tiers |
| `forget` | forget |
| `propose` | propose |
| `feedback` | feedback |
| `maintenance` | dream-input, supersede, mark, cool, merge, assign (a maintenance run only) |

The order is fixed: a lone surrogate in an argument's name or in the ``action`` value
(``refused:surrogate``, `write.actions.surrogates`: such text cannot be compared with a name), the
tool's name, then the maintenance gate (`maintenance.gate`: the maintenance
actions only in a running maintenance job, the identity actions and forget never in one), then the
action's parse (its ``refused:arguments`` and other shape refusals), then its apply. An action name
the table does not hold goes to `identity.DEFAULT`, whose parse names the field that is wrong. A
write that meets a full disk answers ``refused:disk-full`` (the journal has undone its commit).

Adding an action: a handler module with its `Action` (or an entry in one), one line in `_MODULES`, its
sentences in `sentences`, its argument shape in brokerd's `arguments` and the tool schema in loopd's
`tools`, and its tests.
"""

from __future__ import annotations

import logging

from boxmaker.memoryd.memory import Memory
from boxmaker.memoryd.sentences import Refusal
from boxmaker.memoryd.sentences import identity as identity_sentences
from boxmaker.memoryd.sentences.damage import DISK_FULL
from boxmaker.memoryd.tool import feedback, forget, identity, maintenance, propose, read, recall, tiers
from boxmaker.memoryd.tool.action import Action
from boxmaker.memoryd.tool.call import Call, refuse
from boxmaker.memoryd.write.actions import surrogates
from boxmaker.proto import fsio
from boxmaker.proto.messages import MemoryCall, ToolResponse

LOG = logging.getLogger("boxmaker.memoryd")

_MODULES = (identity, read, tiers, forget, propose, feedback, maintenance)

#: Every `memory` action by name.
ACTIONS: dict[str, Action] = {action.name: action for module in _MODULES for action in module.ACTIONS}


def lookup(name: object) -> Action:
    """The action named `name`, or `identity.DEFAULT` (which refuses it naming the field)."""
    found = ACTIONS.get(name) if isinstance(name, str) else None
    return found or identity.DEFAULT


def call(memory: Memory, message: MemoryCall) -> ToolResponse:
    """Run a decided `recall` or `memory` call with the session's state (module docstring)."""
    return run(memory, Call.of(message))


def run(memory: Memory, decided: Call) -> ToolResponse:
    """Run one `recall` or `memory` call, brokerd's or an MCP client's (`mcp`), by the module
    docstring's order."""
    named = decided.arguments
    refused = surrogates(named, values=False) or surrogates({"action": named.get("action")})
    if refused is not None:
        return refuse(decided, refused)
    if decided.tool == "recall":
        return recall.run(memory, decided)
    if decided.tool != "memory":
        return refuse(
            decided, identity_sentences.arguments(f"memoryd runs recall and memory, not {decided.tool}")
        )
    action = lookup(decided.arguments.get("action"))
    refused = maintenance.gate(memory, decided, action)
    if refused is not None:
        return refuse(decided, refused)
    parsed = action.parse(decided)
    if isinstance(parsed, Refusal):
        return refuse(decided, parsed)
    try:
        return action.apply(memory, decided, parsed)
    except OSError as exc:
        if not fsio.disk_full(exc):
            raise
        LOG.error("disk-full: %s %s was refused, nothing was written: %s", decided.tool, decided.call_id, exc)
        return refuse(decided, DISK_FULL)
