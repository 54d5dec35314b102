"""The owner's erasure in memoryd's files (seed 003 section 12.3; `erase.run`): ``erase-plan`` (what it
would change; nothing is changed), ``erase`` (erase and write the tombstone) and ``erasures``."""

from __future__ import annotations

from boxmaker.memoryd.admin.command import Command
from boxmaker.memoryd.admin.replies import plural, refused
from boxmaker.memoryd.erase import run, scope
from boxmaker.memoryd.memory import Memory
from boxmaker.memoryd.sentences import Refusal
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply


def _erase_plan(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    """What an erasure would change in memoryd's files (nothing is changed). `data.texts` are for
    bxctl to pass to loopd and brokerd; bxctl never prints them."""
    result = run.plan(memory.holdings, request.args)
    if isinstance(result, Refusal):
        return refused(result)
    lines = [f"memoryd ({result['erasure_id']}): scope {', '.join(result['scope_refs'])}"]
    for row in result["holders"]:
        holds = "?" if row["holds"] is None else plural(row["holds"], "match", "matches")
        lines.append(f"  {row['holder_ref']}: {holds}")
    return MemoryAdminReply("\n".join(lines), {"code": "ok", **result})


def _erase(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    """Erase in memoryd's files and write the tombstone (`run.execute`)."""
    result = run.execute(memory.holdings, request.args)
    if isinstance(result, Refusal):
        return refused(result)
    return MemoryAdminReply(run.describe(result), {"code": "ok", "tombstone": result})


def _erasures(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    """The erasure tombstones, oldest first."""
    del request
    found = scope.tombstones(memory.config.layout.memory)
    if not found:
        return MemoryAdminReply("(no erasures)", [])
    return MemoryAdminReply("\n".join(run.describe(t) for t in found), found)


COMMANDS = (
    Command(
        "erase-plan",
        _erase_plan,
        args=frozenset({"items", "sessions", "texts", "reserve", "held"}),
        takes_arg=False,
    ),
    Command(
        "erase",
        _erase,
        args=frozenset(
            {"items", "sessions", "texts", "authority", "erasure_id", "decided_at", "holders", "held"}
        ),
        takes_arg=False,
    ),
    Command("erasures", _erasures, takes_arg=False),
)
