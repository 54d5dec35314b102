"""The maintenance gate and autodream's actions of the `memory` tool (seed 003 section 14; the `dream`
package docstring gives the rules).

`gate` runs first for every action: a maintenance action (``dream-input``, ``supersede``, ``mark``,
``cool``, ``merge``, ``assign``) is refused unless the session is a running run of a maintenance job
(``refused:maintenance``, `dream.maintenance_only`), and a maintenance run is refused the identity
actions and ``forget`` (``refused:maintenance``, `dream.maintenance_identity`). Then ``dream-input``
answers the pass's inputs as a labelled tool result; the changing actions apply through `itemops`, or,
with ``[dream] stage = true``, are first checked without writing (`dream.actions.dry_run`) and recorded
for the owner (`dream.staging.Staging.stage`).
"""

from __future__ import annotations

from boxmaker.memoryd.dream.actions import Action as DreamAction
from boxmaker.memoryd.dream.actions import DreamInput, apply_one, dry_run, maintenance_job, parse
from boxmaker.memoryd.dream.inputs import dream_input
from boxmaker.memoryd.memory import Memory, excluded
from boxmaker.memoryd.sentences import OK, Refusal, dream
from boxmaker.memoryd.tool.action import Action
from boxmaker.memoryd.tool.call import Call, answer
from boxmaker.memoryd.write.answer import guarded
from boxmaker.proto.messages import ToolResponse


def gate(memory: Memory, call: Call, action: Action) -> Refusal | None:
    """The maintenance gate (module docstring), or None when the action may go on."""
    if not (action.maintenance or action.barred_in_maintenance):
        return None
    running = maintenance_job(memory.config.layout.jobs, call.session) is not None
    if action.barred_in_maintenance and running:
        return dream.maintenance_identity(action.name)
    if action.maintenance and not running:
        return dream.maintenance_only(action.name)
    return None


def _parse(call: Call) -> DreamAction | Refusal:
    return parse(call.arguments)


def _input(memory: Memory, call: Call, wanted: DreamInput) -> ToolResponse:
    text, label = dream_input(memory.writer, lambda: excluded(memory), call.caller, wanted)
    return ToolResponse(call.call_id, text, OK, label)


def _change(memory: Memory, call: Call, action: DreamAction) -> ToolResponse:
    caller = call.caller
    if memory.config.dream_stage:
        refused = dry_run(memory.writer, excluded(memory), caller, action)
        return answer(call, refused or memory.staging.stage(caller, call.arguments))
    return answer(call, guarded(lambda: apply_one(memory.writer, excluded(memory), caller, action)))


ACTIONS = (
    Action("dream-input", _parse, _input, maintenance=True),
    *(
        Action(name, _parse, _change, maintenance=True)
        for name in ("supersede", "mark", "cool", "merge", "assign")
    ),
)
