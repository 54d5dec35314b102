"""The owner's review, tiering, proposals and feedback (M5d section 4.4; seed 003 sections 16, 17 and
23): ``review`` (a plan; nothing is changed), ``tiers``, ``proposals`` with ``proposal-accept`` and
``proposal-reject``, ``feedback`` (the owner's event) and ``feedback-of`` (an item's events)."""

from __future__ import annotations

import re
from collections.abc import Callable

from boxmaker.memoryd.admin.arguments import item_id
from boxmaker.memoryd.admin.command import Command
from boxmaker.memoryd.admin.replies import answer, refused
from boxmaker.memoryd.files.store import FileUnreadable
from boxmaker.memoryd.memory import Memory
from boxmaker.memoryd.review import plan, proposals
from boxmaker.memoryd.review.feedback import describe, of_item, read_feedback, record
from boxmaker.memoryd.review.tiering import listing_now
from boxmaker.memoryd.review.tiers import DEFAULT_PAGE, MAX_PAGE
from boxmaker.memoryd.sentences import Refusal, capture, unavailable
from boxmaker.memoryd.write.answer import guarded
from boxmaker.proto.errors import InvalidBody
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply


def _tiers(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    """M5d section 4.4 and DESIGN 11: the listing the tiering job and the owner read (`tiers`), one page
    of notes at a time (``offset``, ``limit``: 0 for the most one page holds; `tiers.listing`)."""
    untrusted = request.args.get("untrusted", False)
    offset = request.args.get("offset", 0)
    limit = request.args.get("limit", DEFAULT_PAGE)
    counts = all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (offset, limit))
    if not isinstance(untrusted, bool) or not counts:
        raise InvalidBody(
            "memory_admin",
            'tiers takes args {"untrusted": true or false, "offset": 0 or more, '
            '"limit": 0 or more (0: a full page)}',
        )
    result = listing_now(
        memory.store,
        memory.journal,
        memory.controls,
        memory.recaller.recalls,
        untrusted,
        offset=offset,
        limit=limit or MAX_PAGE,
    )
    if isinstance(result, Refusal):
        return refused(result)
    return MemoryAdminReply(result.text, result.data)


def _proposals(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    """Pending proposals (every one with ``all``), with refs and eligibility; never a write."""
    show_all = request.args.get("all", False)
    if not isinstance(show_all, bool):
        raise InvalidBody("memory_admin", 'proposals takes args {"all": true or false}')
    result = proposals.listing(memory.writer, show_all)
    if isinstance(result, Refusal):
        return refused(result)
    text, rows = result
    return MemoryAdminReply(text, rows)


def _proposal_decision(accept: bool) -> Callable[[Memory, MemoryAdmin], MemoryAdminReply]:
    def decide(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
        if not proposals.is_proposal_id(request.arg):
            raise InvalidBody(
                "memory_admin", f"{request.arg[:40]!r} is not a proposal id (mempolicy-YYYY-MM-DD-NNN)"
            )
        untrusted_ok = request.args.get("untrusted_ok") is True
        return answer(guarded(lambda: proposals.decide(memory.writer, request.arg, accept, untrusted_ok)))

    return decide


def _review(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    """The review plan (`plan.review`): text and data; nothing is changed."""
    del request
    try:
        text, data = plan.review(memory.writer, memory.controls)
    except (OSError, FileUnreadable) as exc:
        return refused(unavailable(str(exc), "no plan was made"))
    return MemoryAdminReply(text, data)


def _feedback(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    """The owner's feedback event (`review.feedback.record`, ``recorded_by: owner``); the reply's
    data: ``{"code", "edit", "feedback_id"}`` (the new ``memfb-`` id once recorded)."""
    done = record(memory.writer, memory.recaller, dict(request.args))
    reply = answer(done)
    recorded = re.search(r"\bmemfb-\d{4}-\d{2}-\d{2}-\d{3,}\b", done.output) if done.ok else None
    if recorded is not None and isinstance(reply.data, dict):
        reply.data["feedback_id"] = recorded.group(0)
    return reply


def _feedback_of(memory: Memory, request: MemoryAdmin) -> MemoryAdminReply:
    """Every feedback event naming item ``arg``, oldest first; ``refused:not-found`` for an id the
    store does not hold."""
    item_id(request.arg)
    if memory.items.get(request.arg) is None:
        return refused(capture.item_not_found(request.arg))
    try:
        found = of_item(read_feedback(memory.config.layout.memory), request.arg)
    except OSError as exc:
        return refused(unavailable(str(exc), "nothing to list"))
    if not found:
        return MemoryAdminReply(f"(no feedback on {request.arg})", [])
    return MemoryAdminReply("\n".join(describe(e) for e in found), found)


COMMANDS = (
    Command("review", _review, takes_arg=False),
    Command("tiers", _tiers, args=frozenset({"untrusted", "offset", "limit"}), takes_arg=False),
    Command("proposals", _proposals, args=frozenset({"all"}), takes_arg=False),
    Command("proposal-accept", _proposal_decision(True), args=frozenset({"untrusted_ok"})),
    Command("proposal-reject", _proposal_decision(False)),
    Command(
        "feedback",
        _feedback,
        args=frozenset(
            {"retrieval", "verdict", "items", "role", "confidence", "outcome", "decision", "evidence"}
        ),
        takes_arg=False,
    ),
    Command("feedback-of", _feedback_of),
)
