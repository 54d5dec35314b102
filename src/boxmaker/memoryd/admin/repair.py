"""The owner's ``repair`` (docs/runbook.md ``memory-damaged``): what the journal would restore of the
damage the start-up check finds now (`startcheck.repair.plan`, changing no file; ``status`` shows what
it found from then on), and with ``{"yes": true}`` the restore itself, each file one journalled commit
(`startcheck.repair.apply`)."""

from __future__ import annotations

from boxmaker.memoryd.admin.command import Command
from boxmaker.memoryd.admin.replies import plural
from boxmaker.memoryd.memory import Memory
from boxmaker.memoryd.startcheck import repair
from boxmaker.proto.errors import InvalidBody
from boxmaker.proto.escape import escape_line
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply


def _repair(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    yes = request.args.get("yes", False)
    if not isinstance(yes, bool):
        raise InvalidBody("memory_admin", 'repair takes args {"yes": true or false}')
    folder = memory.config.layout.memory
    with memory.writer.lock:
        chosen = repair.plan(folder, memory.journal, memory.exclusion_for)
        memory.checkpoints.findings = list(chosen.findings)  # status shows what this check found
        lines, data = chosen.lines, {"code": "ok", "applied": False, **chosen.data()}
        if yes and chosen.restores:
            left = repair.apply(chosen, memory.journal, memory.checkpoints)
            data.update(applied=True, left=[{"file": f.file, "text": f.sentence} for f in left])
            lines.append(f"restored {plural(len(chosen.restores), 'file')} from the journal")
            lines += [f"still found: {f.sentence}" for f in left]
        elif chosen.restores:
            lines.append("nothing was changed; `bxctl memory repair --yes` restores these from the journal")
    return MemoryAdminReply("\n".join(escape_line(line) for line in lines), data)


COMMANDS = (Command("repair", _repair, args=frozenset({"yes"}), takes_arg=False),)
