"""Metamemory: retrieval records and outcome feedback (seed 003 section 23, memory:L5; checklist 13-16).

Retrieval records are `index.retrievals`: every recall memoryd logs is one, with its ``memret-`` id.

Feedback events (section 23.2) live in ``memory/feedback.jsonl``, append-only, one event a line::

    {"event_id": "memfb-2026-11-29-001", "task_id": "chat-x#4", "retrieval_ref": "memret-2026-11-29-003",
     "memory_item_ids": ["mem-2026-11-20-001"], "use_role": "action-premise",
     "action_or_decision": "...", "outcome": "...", "verdict_scheme": "intervention-outcome-v1",
     "verdict": "misleading", "attribution_confidence_scheme": "ordinal-confidence-v1",
     "attribution_confidence": "medium", "evidence_refs": ["runtime:host-check"],
     "observed_at": "2026-11-29T12:00:00Z", "recorded_by": "owner"}

``action_or_decision`` and ``outcome`` appear only when given. Each event is written by one journal
commit (action ``feedback``, the event under ``"feedback"`` on the line) that appends it to
feedback.jsonl, so replay rebuilds the file (`replay`). ``recorded_by`` is ``owner`` (``bxctl memory
feedback``) or ``session`` (the ``memory`` tool's ``feedback`` action, a self-rating: stored as is,
weak evidence for review, section 23.3 rule 4); a session's ``task_id`` is its own session and turn,
the owner's is the retrieval's.

`record` checks, in order (each refusal a fixed sentence, nothing written): the retrieval id's form
and that the recall log holds it (``refused:not-found``); a session names only its own session's
retrievals (``refused:not-found``); the items, when given, are among the retrieval's items, and there
is at least one (``refused:arguments``); `use_role`, `verdict`, `attribution_confidence` in their closed
sets (``refused:arguments``); ``outcome`` and ``action_or_decision`` 1 to 300 characters, at most 10
``evidence_refs`` of 1 to 200 characters on one line; every text passes the write check (DESIGN
10.6 rules 1-11, ``refused:secret`` included). No transcript is ever stored: only these bounded fields
(checklist 16).

Feedback never changes an item: not its text, confidence or status; items.jsonl is not touched
(section 23.4). It raises review priority only (`tally`, read by `plan`); a repeatedly misleading item
is listed there as a candidate for a proposal, never changed (checklist 14).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from boxmaker.memoryd.check.rules import check_text
from boxmaker.memoryd.files.entries import prepare
from boxmaker.memoryd.files.journal import Append, Change, encode_line, read_jsonl
from boxmaker.memoryd.files.names import FEEDBACK_FILE
from boxmaker.memoryd.index.recall import Recaller
from boxmaker.memoryd.index.retrievals import DEFAULT_ROLE, find_retrieval, real_day, stamp, task_id
from boxmaker.memoryd.items.store import is_item_id
from boxmaker.memoryd.sentences import OK, Refusal, identity, review, unavailable
from boxmaker.memoryd.write.answer import Answer
from boxmaker.memoryd.write.writer import Writer
from boxmaker.proto.escape import escape_line
from boxmaker.proto.ids import OWNER_SESSION

log = logging.getLogger("boxmaker.memoryd")

USE_ROLES = (
    "background",
    "action-premise",
    "constraint",
    "analogy",
    "conflict-source",
    "verification-target",
)
VERDICTS = ("helpful", "misleading", "neutral", "unknown")
ATTRIBUTIONS = ("low", "medium", "high")
VERDICT_SCHEME = "intervention-outcome-v1"
ATTRIBUTION_SCHEME = "ordinal-confidence-v1"
DEFAULT_ATTRIBUTION = "low"
TEXT_LIMIT = 300
REF_LIMIT = 200
MAX_REFS = 10
#: How many misleading verdicts make an item a candidate for a proposal in review.
CANDIDATE_AT = 2

FEEDBACK_ID_PATTERN = r"^memfb-(\d{4}-\d{2}-\d{2})-(\d{3,})\Z"
_FEEDBACK = re.compile(FEEDBACK_ID_PATTERN)
_ONE_LINE_BAD = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def is_feedback_id(value: str) -> bool:
    """True for ``memfb-YYYY-MM-DD-NNN`` with a real date."""
    match = _FEEDBACK.match(value)
    return match is not None and real_day(match.group(1)) is not None


# Retrieval records -------------------------------------------------------------------------------


# Feedback ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FeedbackArgs:
    """What a caller gives: the retrieval, the verdict and the optional fields (module docstring)."""

    retrieval: str
    verdict: str
    items: tuple[str, ...] = ()
    role: str | None = None
    attribution: str | None = None
    outcome: str | None = None
    decision: str | None = None
    evidence: tuple[str, ...] = field(default=())


def parse_args(arguments: dict[str, Any]) -> FeedbackArgs | Refusal:
    """The `memory` tool's ``feedback`` arguments (and the owner's ``feedback`` admin args):
    ``retrieval`` and ``verdict`` (strings, required), ``items`` and ``evidence`` (lists of strings),
    ``role``, ``confidence`` (the attribution confidence: low, medium, high), ``outcome``, ``decision``
    (strings); other keys are refused."""
    known = {
        "action",
        "retrieval",
        "verdict",
        "items",
        "role",
        "confidence",
        "outcome",
        "decision",
        "evidence",
    }
    unknown = sorted(set(arguments) - known)
    if unknown:
        return identity.arguments(f"feedback takes no argument `{unknown[0]}`")
    for key in ("retrieval", "verdict"):
        if not isinstance(arguments.get(key), str):
            return identity.arguments(f"feedback needs `{key}`, a string")
    for key in ("role", "confidence", "outcome", "decision"):
        if arguments.get(key) is not None and not isinstance(arguments[key], str):
            return identity.arguments(f"`{key}` must be a string")
    lists: dict[str, tuple[str, ...]] = {}
    for key in ("items", "evidence"):
        value = arguments.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return identity.arguments(f"`{key}` must be a list of strings")
        lists[key] = tuple(value)
    return FeedbackArgs(
        retrieval=arguments["retrieval"],
        verdict=arguments["verdict"],
        items=lists["items"],
        role=arguments.get("role"),
        attribution=arguments.get("confidence"),
        outcome=arguments.get("outcome"),
        decision=arguments.get("decision"),
        evidence=lists["evidence"],
    )


def _vet(name: str, value: str, limit: int, one_line: bool) -> str | Refusal:
    text = prepare(value)
    if not 1 <= len(text) <= limit:
        return review.feedback_length(name, limit, len(text))
    if one_line and _ONE_LINE_BAD.search(text):
        return identity.arguments(f"`{name}` must be one line without control characters")
    refused = check_text(text)
    if refused is not None:
        return Refusal(refused.code, refused.sentence)
    return text


def build_event(
    args: FeedbackArgs,
    retrieval: dict[str, Any] | None,
    *,
    session: str,
    turn: int,
    ident: str,
    moment: dt.datetime,
) -> dict[str, Any] | Refusal:
    """The feedback event `args` describe, checked against the retrieval's log line (module
    docstring, in that order), or the refusal. `session` is the recording session or "owner"."""
    owner = session == OWNER_SESSION
    if retrieval is None:
        return review.retrieval_not_found(args.retrieval, owner)
    if not owner and retrieval.get("session") != session:
        return review.retrieval_not_found(args.retrieval)
    retrieved = [str(i) for i in retrieval.get("memory_item_ids") or [] if isinstance(i, str)]
    items = list(dict.fromkeys(args.items)) or retrieved
    for item in items:
        if not is_item_id(item) or item not in retrieved:
            return review.feedback_item(item, args.retrieval)
    if not items:
        return review.feedback_no_items(args.retrieval)
    role = args.role or str(retrieval.get("use_role") or DEFAULT_ROLE)
    checks = ((role, USE_ROLES, "role"), (args.verdict, VERDICTS, "verdict"))
    attribution = args.attribution or DEFAULT_ATTRIBUTION
    for value, allowed, name in (*checks, (attribution, ATTRIBUTIONS, "confidence")):
        if value not in allowed:
            return review.feedback_value(name, value, allowed)
    texts: dict[str, str] = {}
    for key, given in (("decision", args.decision), ("outcome", args.outcome)):
        if given is not None:
            vetted = _vet(key, given, TEXT_LIMIT, one_line=False)
            if isinstance(vetted, Refusal):
                return vetted
            texts[key] = vetted
    if len(args.evidence) > MAX_REFS:
        return identity.arguments(f"`evidence` holds at most {MAX_REFS} references")
    refs: list[str] = []
    for ref in args.evidence:
        vetted = _vet("evidence", ref, REF_LIMIT, one_line=True)
        if isinstance(vetted, Refusal):
            return vetted
        refs.append(vetted)
    event: dict[str, Any] = {
        "event_id": ident,
        "task_id": str(retrieval.get("task_id") or OWNER_SESSION) if owner else task_id(session, turn),
        "retrieval_ref": args.retrieval,
        "memory_item_ids": items,
        "use_role": role,
    }
    if "decision" in texts:
        event["action_or_decision"] = texts["decision"]
    if "outcome" in texts:
        event["outcome"] = texts["outcome"]
    event.update(
        {
            "verdict_scheme": VERDICT_SCHEME,
            "verdict": args.verdict,
            "attribution_confidence_scheme": ATTRIBUTION_SCHEME,
            "attribution_confidence": attribution,
            "evidence_refs": refs,
            "observed_at": stamp(moment),
            "recorded_by": "owner" if owner else "session",
        }
    )
    return event


def read_feedback(memory_dir: Path) -> list[dict[str, Any]]:
    """Every feedback event, oldest first (a line that is not one is skipped with a log line).

    Raises:
        OSError: when the file exists but cannot be read.
    """
    return read_jsonl(memory_dir / FEEDBACK_FILE, ("event_id", "memory_item_ids", "verdict"))


def next_feedback_id(events: Iterable[dict[str, Any]], day: dt.date) -> str:
    """The next ``memfb-`` id of `day`: the highest of that day in `events` plus one."""
    prefix = f"memfb-{day.isoformat()}-"
    highest = 0
    for event in events:
        value = event.get("event_id")
        if isinstance(value, str) and value.startswith(prefix) and value[len(prefix) :].isdigit():
            highest = max(highest, int(value[len(prefix) :]))
    return f"{prefix}{highest + 1:03d}"


def change(event: dict[str, Any], session: str, call: str, untrusted: bool) -> Change:
    """The journal commit of one feedback event: action ``feedback``, the event under
    ``"feedback"``, appended to feedback.jsonl."""
    entry = {
        "session": session,
        "call": call,
        "untrusted": untrusted,
        "action": "feedback",
        "file": FEEDBACK_FILE,
        "where": FEEDBACK_FILE,
        "before": [],
        "after": [],
        "feedback": [event],
    }
    return Change(entry, [Append(FEEDBACK_FILE, encode_line(event) + b"\n")])


def of_item(events: Iterable[dict[str, Any]], item: str) -> list[dict[str, Any]]:
    """The events naming `item`, oldest first."""
    return [e for e in events if item in (e.get("memory_item_ids") or [])]


@dataclass(slots=True)
class Tally:
    """One item's verdicts: counts by verdict, and how many misleading ones the owner recorded."""

    verdicts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))
    misleading_by_owner: int = 0
    events: list[str] = field(default_factory=list)

    @property
    def misleading(self) -> int:
        """Every misleading verdict (the owner's and the sessions' self-ratings)."""
        return self.verdicts["misleading"]


def tally(events: Iterable[dict[str, Any]]) -> dict[str, Tally]:
    """Verdict counts per item id."""
    found: dict[str, Tally] = {}
    for event in events:
        verdict = event.get("verdict")
        if verdict not in VERDICTS:
            continue
        for item in event.get("memory_item_ids") or []:
            counts = found.setdefault(str(item), Tally())
            counts.verdicts[str(verdict)] += 1
            counts.events.append(str(event.get("event_id")))
            if verdict == "misleading" and event.get("recorded_by") == "owner":
                counts.misleading_by_owner += 1
    return found


def describe(event: dict[str, Any]) -> str:
    """One event: a head line and its fields indented below, every value escaped (`escape_line`)."""
    head = (
        f"{event.get('event_id')}  {event.get('observed_at')}  {event.get('verdict')} "
        f"({event.get('use_role')}, attribution {event.get('attribution_confidence')}) "
        f"by {event.get('recorded_by')}  task {event.get('task_id')}  retrieval {event.get('retrieval_ref')}"
    )
    items = ", ".join(str(i) for i in event.get("memory_item_ids") or [])
    parts = [head, f"items {items}"]
    for key in ("action_or_decision", "outcome"):
        if event.get(key):
            parts.append(f"{key.replace('_', ' ')}: {event[key]}")
    refs: Sequence[str] = event.get("evidence_refs") or []
    if refs:
        parts.append(f"evidence {', '.join(str(r) for r in refs)}")
    return "\n  ".join(escape_line(part) for part in parts)


def record(
    writer: Writer,
    recaller: Recaller,
    arguments: dict[str, Any],
    *,
    session: str = OWNER_SESSION,
    call: str = "",
    untrusted: bool = False,
) -> Answer:
    """Check and record one feedback event (module docstring): one journal commit (action
    ``feedback``) appending it to feedback.jsonl; items.jsonl is never touched. A session's event is
    ``recorded_by: session`` with its own turn (`recaller.turns`); the owner's is ``recorded_by: owner``.
    """
    parsed = parse_args(arguments)
    if isinstance(parsed, Refusal):
        return Answer.refused(parsed)
    turns = recaller.turns
    turn = turns.turn_of(session) if turns and session != OWNER_SESSION else 0
    try:
        retrieval = find_retrieval(recaller.recalls, parsed.retrieval)
        with writer.lock:
            memory_dir = writer.store.dir
            moment = writer.now()
            ident = next_feedback_id(read_feedback(memory_dir), moment.date())
            event = build_event(parsed, retrieval, session=session, turn=turn, ident=ident, moment=moment)
            if isinstance(event, Refusal):
                return Answer.refused(event)
            line = writer.journal.commit(change(event, session, call, untrusted))
    except OSError as exc:
        log.error("feedback not recorded: %s", exc)
        return Answer.refused(unavailable(str(exc), "nothing was recorded"))
    text = review.feedback_recorded(ident, event["memory_item_ids"], event["verdict"])
    return Answer(text, OK, str(line["id"]))
