"""The replies of the owner's commands (DESIGN 10.3: ``memory_admin_reply {"text", "data"}``): ``text`` is
what bxctl prints, ``data`` what ``--json`` prints; a refused command still answers a reply, with
``data.code`` saying ``refused:<reason>``.
"""

from __future__ import annotations

from boxmaker.memoryd.sentences import Refusal
from boxmaker.memoryd.write.answer import Answer
from boxmaker.proto.messages import MemoryAdminReply


def answer(done: Answer) -> MemoryAdminReply:
    """A write's answer: its sentence, and ``{"code", "edit"}`` (the edit id, or null)."""
    return MemoryAdminReply(done.output, {"code": done.code, "edit": done.edit or None})


def refused(refusal: Refusal) -> MemoryAdminReply:
    """A refusal: its sentence, and ``{"code"}``."""
    return MemoryAdminReply(refusal.sentence, {"code": refusal.code})


def plural(count: int, one: str, many: str | None = None) -> str:
    """``1 entry``, ``2 entries``, ``1,204 notes``."""
    return f"{count:,} {one if count == 1 else (many or one + 's')}"
