"""The owner's staged autodream passes (seed 003 section 14; `dream.staging`): ``dream-show``,
``dream-apply`` (each staged action with every check, against the store as it is then) and
``dream-discard``."""

from __future__ import annotations

from typing import Any

from boxmaker.memoryd.admin.command import Command
from boxmaker.memoryd.admin.replies import refused
from boxmaker.memoryd.dream.actions import apply_one
from boxmaker.memoryd.memory import Memory, excluded
from boxmaker.memoryd.sentences import Refusal
from boxmaker.proto.escape import escape
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply


def _dream_reply(result: tuple[str, Any] | Refusal) -> MemoryAdminReply:
    if isinstance(result, Refusal):
        return refused(result)
    return MemoryAdminReply(escape(result[0]), result[1])


def _dream_show(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    return _dream_reply(memory.staging.show(request.arg or None))


def _dream_apply(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    return _dream_reply(
        memory.staging.apply(
            request.arg, lambda caller, action: apply_one(memory.writer, excluded(memory), caller, action)
        )
    )


def _dream_discard(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    return _dream_reply(memory.staging.discard(request.arg))


COMMANDS = (
    Command("dream-show", _dream_show),
    Command("dream-apply", _dream_apply),
    Command("dream-discard", _dream_discard),
)
