"""The owner's ``repair`` (docs/runbook.md ``memory-damaged``): what the journal would restore of the
damage the start-up check finds now (`startcheck.repair.plan`, changing no file; ``status`` shows what
it found from then on), and with ``{"yes": true}`` the restore itself, each file one journalled commit
(`startcheck.repair.apply`). ``verify`` checks the journal's hash chain and the files against its replay
(`startcheck.verify`), changing nothing; with ``{"head": H}`` it also says whether the history up to a
head the owner recorded is unchanged."""

from __future__ import annotations

from boxmaker.memoryd.admin.command import Command
from boxmaker.memoryd.admin.replies import plural, refused
from boxmaker.memoryd.files import chain
from boxmaker.memoryd.memory import Memory
from boxmaker.memoryd.sentences import files as files_sentences
from boxmaker.memoryd.startcheck import repair, verify
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


def _verify(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    head = request.args.get("head", "")
    if not isinstance(head, str) or (head and not chain.is_head(head.strip().lower())):
        raise InvalidBody("memory_admin", "--head takes a chain value as verify printed it: 64 hex digits")
    folder = memory.config.layout.memory
    try:
        with memory.writer.lock:
            found = verify.verify(folder, memory.exclusion_for, head.strip().lower())
    except OSError as exc:
        return refused(files_sentences.unwritable(str(folder), exc.strerror or str(exc)))
    return MemoryAdminReply("\n".join(escape_line(line) for line in found.lines()), found.data())


COMMANDS = (
    Command("repair", _repair, args=frozenset({"yes"}), takes_arg=False),
    Command("verify", _verify, args=frozenset({"head"}), takes_arg=False),
)
